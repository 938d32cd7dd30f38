package forgestatus

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// claimCheckingPoster records each post with the claims the API server
// held when it was sent.
type claimCheckingPoster struct {
	c     client.Client
	posts []string
}

func (p *claimCheckingPoster) Post(ctx context.Context, s forge.Status) (forge.Posted, error) {
	repo := &taugridv1.TauRepository{}
	if err := p.c.Get(ctx, researchRepo.NamespacedName, repo); err != nil {
		return forge.Posted{}, err
	}
	p.posts = append(p.posts, s.Context+" claimed "+claimedSHA(repo.Status.ReportedRefusals, s.SHA))
	return forge.Posted{}, nil
}

func (p *claimCheckingPoster) Shows(context.Context, forge.Status) (forge.Posted, bool, error) {
	return forge.Posted{}, false, nil
}

// claimedSHA says whether a claim of sha is among keys.
func claimedSHA(keys []string, sha string) string {
	if slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "@"+sha) }) {
		return "yes"
	}
	return "no"
}

func TestARefusalIsClaimedBeforeItIsPosted(t *testing.T) {
	w := newForgeWorld(t, nil, func(api string) []client.Object { return []client.Object{refusedTwice(api, false, "forge").Obj()} })
	p := &claimCheckingPoster{c: w.c}
	w.posters.NewPoster = func(forge.Config) (forge.StatusPoster, error) { return p, nil }
	r := &RefusalReporter{Client: w.c, Posters: w.posters, Recorder: w.events}
	if _, err := r.Reconcile(context.Background(), researchRepo); err != nil {
		t.Fatal(err)
	}
	want := []string{"tau/tags/run/bad claimed yes", "tau/r-20261130 claimed yes"}
	if d := cmp.Diff(want, p.posts); d != "" {
		t.Errorf("posts (-want +got):\n%s", d)
	}
}

// The cache lags behind the API server: a reconcile reading the repository
// from before the claims conflicts on its claim, posts nothing and reads
// again soon.
func TestAStaleCopyOfTheRepositoryPostsNoRefusalTwice(t *testing.T) {
	var stale *taugridv1.TauRepository
	faults := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if repo, ok := obj.(*taugridv1.TauRepository); ok && stale != nil {
			stale.DeepCopyInto(repo)
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	w := newForgeWorld(t, faults, func(api string) []client.Object { return []client.Object{refusedTwice(api, false, "forge").Obj()} })
	before := w.repo(t)
	r := &RefusalReporter{Client: w.c, Posters: w.posters, Recorder: w.events}
	if _, err := r.Reconcile(context.Background(), researchRepo); err != nil {
		t.Fatal(err)
	}
	stale = before
	got, err := r.Reconcile(context.Background(), researchRepo)
	if err != nil || got != (reconcile.Result{RequeueAfter: time.Second}) {
		t.Errorf("from a stale copy: %+v, %v; want a read again in a second", got, err)
	}
	if n := len(w.srv.Accepted()); n != 2 {
		t.Errorf("the forge took %d refusals, want each of the 2 once: %q", n, w.posted())
	}
}
