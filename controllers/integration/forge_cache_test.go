package integration

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/forgestatus"
)

// forgeBenchSeq names each run of the benchmark's fixture apart.
var forgeBenchSeq atomic.Int32

// BenchmarkForgeReconcileIdle measures one forge reconcile of a run whose
// status the forge already shows, the common case (every change of a run
// brings one), reading the run and its repository from an informer cache
// on the real API server as the controller does. hack/scale: 18% of the
// controller's CPU was deep copies of TauRuns read here.
func BenchmarkForgeReconcileIdle(b *testing.B) {
	f := newForgeFixture(b, fmt.Sprintf("fbench%d", forgeBenchSeq.Add(1)), forge.GitHub, forgeToken)
	f.research.tag("run/idle")
	f.poll(b)
	run := f.runOf(b, "refs/tags/run/idle")
	f.reconcileRun(b, run.Name, taugridv1.PhaseAdmitted)
	f.mustReconcileForge(b, run.Name)
	posts := len(f.srv.Calls())

	cached := cachedClient(b, f.ns)
	r := &forgestatus.ForgeReconciler{Client: cached, Clock: f.clock, Recorder: f.rec}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: run.Name}}
	ctx := context.Background()
	waitCached(b, cached, req.NamespacedName, func(run *taugridv1.TauRun) bool { return run.Status.Forge != nil && !run.Status.Forge.InFlight })

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res, err := r.Reconcile(ctx, req); err != nil || !res.IsZero() {
			b.Fatalf("idle reconcile: %v, %v; want nothing to do", res, err)
		}
	}
	b.StopTimer()
	if n := len(f.srv.Calls()); n != posts {
		b.Errorf("%d forge calls after idle reconciles, want the %d before", n, posts)
	}
}

// TestForgePostsLeaveTheCachesRunAlone: the forge reconciler reads runs
// as the cache holds them, uncopied; a reconcile that posts and patches
// the run's status must change nothing the cache holds (every reader
// shares it), only the API server's copy.
func TestForgePostsLeaveTheCachesRunAlone(t *testing.T) {
	f := newForgeFixture(t, "fcache1", forge.GitHub, forgeToken)
	f.research.tag("run/cached")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/cached")
	f.mustReconcileForge(t, run.Name)
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	cached := cachedClient(t, f.ns)
	r := &forgestatus.ForgeReconciler{Client: cached, Clock: f.clock, Recorder: f.rec}
	key := types.NamespacedName{Namespace: f.ns, Name: run.Name}
	waitCached(t, cached, key, func(run *taugridv1.TauRun) bool { return run.Status.Phase == taugridv1.PhaseAdmitted })

	held := &taugridv1.TauRun{} // shares the cache's maps, slices and pointers
	if err := cached.Get(context.Background(), key, held, client.UnsafeDisableDeepCopy); err != nil {
		t.Fatal(err)
	}
	before := held.DeepCopy()
	if res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil || !res.IsZero() {
		t.Fatalf("reconcile: %v, %v", res, err)
	}
	if want := []string{"pending: accepted: preparing the run", "pending: admitted in runs: starting"}; !slices.Equal(f.posted(), want) {
		t.Errorf("posted %q, want %q", f.posted(), want)
	}
	if d := cmp.Diff(before, held); d != "" {
		t.Errorf("the reconcile changed the cache's run (-before +after):\n%s", d)
	}
	var stored taugridv1.TauRun
	if err := k8s.Get(context.Background(), key, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.Forge == nil || stored.Status.Forge.Phase != taugridv1.PhaseAdmitted || stored.Status.Forge.InFlight {
		t.Errorf("status.forge on the API server %+v, want the admitted post recorded", stored.Status.Forge)
	}
}

// cachedClient reads from an informer cache of namespace ns on the real
// API server, as the controller's client does, and writes to the server.
func cachedClient(tb testing.TB, ns string) client.Client {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	cl, err := client.New(env.Config, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		tb.Fatal(err)
	}
	return cl
}

// waitCached waits until the cache shows the run satisfying ok.
func waitCached(tb testing.TB, c client.Reader, key types.NamespacedName, ok func(*taugridv1.TauRun) bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var run taugridv1.TauRun
		if err := c.Get(context.Background(), key, &run); err == nil && ok(&run) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("the cache never showed %s as awaited", key)
}
