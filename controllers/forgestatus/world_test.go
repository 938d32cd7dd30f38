package forgestatus

import (
	"context"
	"fmt"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// The table tests of the forge status controllers: the fake client
// (sharedtest) and a Gitea speaking its REST API on httptest (forgetest).
// What only the real API server shows (watches, the cache's lag on a real
// informer) is in controllers/integration.

const (
	ns         = "team-a"
	forgeToken = "forge-token-0123456789abcdef"
	repoURL    = "https://git.example.com/team-a/research.git"
)

// forgeWorld is a forge, a fake client holding the forge's Secret and the
// test's objects, and the reconcilers' shared parts.
type forgeWorld struct {
	srv     *forgetest.Server
	c       client.Client
	events  *events.FakeRecorder
	clock   *clocktesting.FakeClock
	posters *forge.Posters
}

// newForgeWorld starts the forge and builds the client from objs, which
// objs builds given the forge's API URL; faults, when set, intercept the
// client's calls.
func newForgeWorld(t *testing.T, faults *interceptor.Funcs, objs func(api string) []client.Object) *forgeWorld {
	t.Helper()
	srv := forgetest.New(forge.Gitea, forgeToken)
	t.Cleanup(srv.Close)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge", Namespace: ns},
		Data: map[string][]byte{gitsource.SecretToken: []byte(forgeToken)}}
	b := sharedtest.Builder(append([]client.Object{secret}, objs(srv.URL)...)...)
	if faults != nil {
		b = b.WithInterceptorFuncs(*faults)
	}
	c := b.Build()
	clk := sharedtest.Clock()
	return &forgeWorld{srv: srv, c: c, events: events.NewFakeRecorder(20), clock: clk,
		posters: &forge.Posters{Reader: c, Clock: clk}}
}

// forgeRepo is the research repository reporting to the Gitea at api
// with the token in Secret secret.
func forgeRepo(api, secret string) *builders.TauRepositoryBuilder {
	return builders.MakeTauRepository("research", ns, repoURL).ReportsTo(taugridv1.ForgeType(forge.Gitea), api, secret)
}

// posted lists what the forge received, as "code state context: description".
func (w *forgeWorld) posted() []string {
	var out []string
	for _, c := range w.srv.Calls() {
		out = append(out, fmt.Sprintf("%d %s %s: %s", c.Code, c.State, c.Context, c.Description))
	}
	return out
}

// drained is every event recorded so far.
func (w *forgeWorld) drained() []string {
	return sharedtest.Drain(w.events)
}

func (w *forgeWorld) run(t *testing.T, name string) *taugridv1.TauRun {
	t.Helper()
	run := &taugridv1.TauRun{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, run); err != nil {
		t.Fatal(err)
	}
	return run
}

func (w *forgeWorld) repo(t *testing.T) *taugridv1.TauRepository {
	t.Helper()
	repo := &taugridv1.TauRepository{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "research"}, repo); err != nil {
		t.Fatal(err)
	}
	return repo
}
