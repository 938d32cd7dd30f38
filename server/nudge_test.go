package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// From team-a's side: it registers the URL that team-b polls with its own
// credentials, and nudges it over and over with its API token. Only
// team-a's repository is polled, at most once per its interval; team-b's is
// never touched. A forge's verified webhook delivery likewise nudges only
// the receiver's own repository.
func TestANudgeReachesOnlyTheNudgersRepositoryAtMostOncePerInterval(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	const url = "https://git.example.com/shared/models.git"
	repo := func(ns string) *taugridv1.TauRepository {
		return &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: "models", Namespace: ns},
			Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: url}, Interval: metav1.Duration{Duration: time.Minute}}}
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
		Data: map[string][]byte{taugridv1.APITokenKey: []byte("tok-a"), taugridv1.APINamespaceKey: []byte("team-a")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(token, repo("team-a"), repo("team-b")).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	nudger := &AnnotationNudger{Client: c, Clock: clk}
	api := &RunsAPI{Client: c, Tokens: &Tokens{Reader: c, Namespace: "tau-system", Clock: clk}, Nudger: nudger, Log: logr.Discard()}
	nudge := func() int {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/team-a/nudge", strings.NewReader(`{"repository": "`+url+`"}`))
		req.Header.Set("Authorization", "Bearer tok-a")
		rec := httptest.NewRecorder()
		api.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	stamp := func(ns string) string {
		r := &taugridv1.TauRepository{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "models"}, r); err != nil {
			t.Fatal(err)
		}
		return r.Annotations[taugridv1.AnnotationNudge]
	}

	if got := nudge(); got != http.StatusAccepted {
		t.Fatalf("team-a's nudge: %d, want 202", got)
	}
	first := stamp("team-a")
	if first == "" || stamp("team-b") != "" {
		t.Fatalf("after team-a's nudge: team-a %q, team-b %q; want team-a's repository alone nudged", first, stamp("team-b"))
	}
	for range 20 {
		clk.Step(time.Second)
		if got := nudge(); got != http.StatusAccepted {
			t.Fatalf("a nudge within the interval: %d, want 202 (coalesced)", got)
		}
	}
	if got := stamp("team-a"); got != first {
		t.Errorf("20 nudges within the interval wrote %q over %q: want one poll per interval", got, first)
	}
	clk.Step(time.Minute)
	nudge()
	if got := stamp("team-a"); got == first {
		t.Errorf("a nudge after the interval was dropped")
	}
	if err := nudger.Nudge(context.Background(), gitsource.Receiver{RepoURL: url, Namespace: "team-a", Name: "models"}); err != nil {
		t.Fatal(err)
	}
	if stamp("team-b") != "" {
		t.Errorf("a webhook delivery for team-a's receiver nudged team-b's repository")
	}
}
