package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
	"github.com/taugrid/taugrid/controllers/shared"
)

// TestAReconcileOnACopyOlderThanItsOwnWriteWaitsAndWritesNothing: a
// cache that lags serves the copy the run reconciler's last status write
// replaced. The reconciler looks again shortly and sends no patch the API
// server would refuse (409); once the cache shows the write, it goes on.
func TestAReconcileOnACopyOlderThanItsOwnWriteWaitsAndWritesNothing(t *testing.T) {
	f, req, stale, cur := reconciledOnce(t, "lag")
	if cur.ResourceVersion == stale.ResourceVersion || len(cur.Status.Phases) == 0 {
		t.Fatalf("the first reconcile wrote no status: %+v", cur.Status)
	}

	lag := &laggingClient{Client: k8s, key: req.NamespacedName, stale: stale, lagging: true}
	f.runRec.Client = lag
	res, err := f.runRec.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != shared.CacheLag {
		t.Errorf("on the copy its write replaced: result %+v, %v; want a look again after %s", res, err, shared.CacheLag)
	}
	if n := lag.patches.Load(); n != 0 {
		t.Errorf("%d status patches sent from the copy the reconciler's own write replaced, want none", n)
	}

	lag.lagging = false
	res, err = f.runRec.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter == shared.CacheLag {
		t.Errorf("on the current copy: result %+v, %v; want the run reconciled, not waited on", res, err)
	}
}

// TestNoControllerPatchesFromACopyAnotherControllersWriteReplaced: the
// run reconciler and the forge reconciler share the process's record of
// its status writes. Each, served by a lagging cache the copy that the
// other's write replaced, waits (the run reconciler looks again shortly,
// the forge's is woken by the write's watch event) and sends no patch (before:
// one the API server refused, 409, and for the forge no post either) and
// no forge call; once the cache shows the write, each goes on.
func TestNoControllerPatchesFromACopyAnotherControllersWriteReplaced(t *testing.T) {
	f, created, req := sharingOneRecord(t, "wshare", "run/shared")
	if _, err := f.runRec.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	ranWrote := f.getRun(t, created.Name)
	if ranWrote.ResourceVersion == created.ResourceVersion {
		t.Fatal("the run reconciler wrote no status")
	}

	lag := &laggingClient{Client: k8s, key: req.NamespacedName, stale: created, lagging: true}
	f.r.Client = lag
	res, err := f.r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != shared.WokenByTheWrite {
		t.Errorf("forge, on the copy the run reconciler's write replaced: result %+v, %v; want to wait for the write's watch event (by itself after %s)", res, err, shared.WokenByTheWrite)
	}
	if n, calls := lag.patches.Load(), len(f.srv.Calls()); n != 0 || calls != 0 {
		t.Errorf("forge, on the copy the run reconciler's write replaced: %d status patches and %d forge calls, want none", n, calls)
	}
	lag.lagging = false
	f.mustReconcileForge(t, created.Name)
	if lag.patches.Load() == 0 || len(f.posted()) == 0 {
		t.Fatalf("forge, on the current copy: %d status patches, posted %q; want the run's status posted and recorded", lag.patches.Load(), f.posted())
	}

	lag = &laggingClient{Client: k8s, key: req.NamespacedName, stale: ranWrote, lagging: true}
	f.runRec.Client = lag
	res, err = f.runRec.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != shared.CacheLag {
		t.Errorf("run, on the copy the forge's writes replaced: result %+v, %v; want a look again after %s", res, err, shared.CacheLag)
	}
	if n := lag.patches.Load(); n != 0 {
		t.Errorf("run, on the copy the forge's writes replaced: %d status patches, want none", n)
	}
	lag.lagging = false
	if res, err = f.runRec.Reconcile(context.Background(), req); err != nil || res.RequeueAfter == shared.CacheLag {
		t.Errorf("run, on the current copy: result %+v, %v; want the run reconciled, not waited on", res, err)
	}
}

// TestAStatusPatchTheAPIServerStoresNothingForLeavesNoWait: a patch whose
// only change is below the second the API server keeps stores nothing and
// leaves the resourceVersion as it was. The cache already holds that copy,
// so the run's next reconcile must go on, not wait for a write that never
// comes (it would wait out the memo's 30 s, ignoring its pods' events).
func TestAStatusPatchTheAPIServerStoresNothingForLeavesNoWait(t *testing.T) {
	f, req, _, cur := reconciledOnce(t, "noop")
	if len(cur.Status.Phases) == 0 {
		t.Fatalf("the first reconcile recorded no phase: %+v", cur.Status)
	}
	next := cur.DeepCopy()
	next.Status.Phases[0].Time = metav1.NewTime(cur.Status.Phases[0].Time.Add(time.Nanosecond))
	if err := f.runRec.PatchStatus(context.Background(), cur, next); err != nil {
		t.Fatal(err)
	}
	if next.ResourceVersion != cur.ResourceVersion {
		t.Fatalf("the API server stored the patch (resourceVersion %s → %s): the test needs one it stores nothing for", cur.ResourceVersion, next.ResourceVersion)
	}
	if f.runRec.CacheLagsWrite(cur) {
		t.Error("after a patch that stored nothing, the current copy is taken for one the cache has not caught up with")
	}
	res, err := f.runRec.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter == shared.CacheLag {
		t.Errorf("reconcile after a patch that stored nothing: result %+v, %v; want the run reconciled, not waited on", res, err)
	}
}

// reconciledOnce requests one run by a tag named after prefix and
// reconciles it once. It returns the run as first created and as that
// reconcile left it.
func reconciledOnce(t *testing.T, prefix string) (f *runFixture, req reconcile.Request, created, cur *taugridv1.TauRun) {
	t.Helper()
	f = newRunFixture(t, prefix)
	ref := "refs/tags/run/" + prefix
	f.research.tag("run/" + prefix)
	f.poll(t)
	created = f.runOf(t, ref)
	req = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(created)}
	if _, err := f.runRec.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return f, req, created, f.runOf(t, ref)
}

// laggingClient serves one run as a cache that has not caught up would,
// and counts the status patches sent.
type laggingClient struct {
	client.Client
	key     client.ObjectKey
	stale   *taugridv1.TauRun
	lagging bool
	patches atomic.Int32
}

func (c *laggingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if run, ok := obj.(*taugridv1.TauRun); ok && c.lagging && key == c.key {
		c.stale.DeepCopyInto(run)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *laggingClient) Status() client.SubResourceWriter {
	return countingWriter{c.Client.Status(), &c.patches}
}

type countingWriter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (w countingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// TestAPollThatRequestsRunsSaysSoInOneEvent: one event per poll names the
// runs it created, counting those beyond the first few; events were the
// API server's busiest writes at scale.
func TestAPollThatRequestsRunsSaysSoInOneEvent(t *testing.T) {
	f := newRunFixture(t, "req")
	rec := events.NewFakeRecorder(100)
	f.repos.Recorder = rec
	for _, tag := range []string{"run/a", "run/b", "run/c", "run/d", "run/e", "run/f", "run/g"} {
		f.research.tag(tag)
	}
	f.poll(t)
	var requested []string
	for _, e := range drain(rec) {
		if strings.Contains(e, repoctrl.ReasonRunRequested) {
			requested = append(requested, e)
		}
	}
	if len(requested) != 1 {
		t.Fatalf("RunRequested events %q, want one for the poll", requested)
	}
	e := requested[0]
	for _, want := range []string{"7 runs requested: ", "RunTag refs/tags/run/a at ", "(target default): TauRun ", "; and 2 more (kubectl get tauruns -l taugrid.dev/repository=research)"} {
		if !strings.Contains(e, want) {
			t.Errorf("event %q does not say %q", e, want)
		}
	}
	if n := strings.Count(e, "TauRun "); n != repoctrl.RequestsNamed {
		t.Errorf("event names %d runs, want %d", n, repoctrl.RequestsNamed)
	}
	if len(f.listRuns(t)) != 7 {
		t.Errorf("%d TauRuns, want 7", len(f.listRuns(t)))
	}
}

// sharingOneRecord is a forge fixture whose run and forge reconcilers
// share one record of writes, as cmd/tau-controller's do, and the run a
// pushed tag made, not yet reconciled.
func sharingOneRecord(t *testing.T, prefix, tag string) (*forgeFixture, *taugridv1.TauRun, reconcile.Request) {
	t.Helper()
	f := newForgeFixture(t, prefix, forge.GitHub, forgeToken)
	written := &shared.Written{}
	f.runRec.Written, f.r.Written = written, written
	f.research.tag(tag)
	f.poll(t)
	created := f.runOf(t, "refs/tags/"+tag)
	return f, created, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(created)}
}

// blockingCreates holds each create of a Job until released is closed,
// saying on held when one is held.
type blockingCreates struct {
	client.Client
	held     chan struct{}
	released chan struct{}
}

func (c *blockingCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*batchv1.Job); ok {
		c.held <- struct{}{}
		<-c.released
	}
	return c.Client.Create(ctx, obj, opts...)
}

// TestNoControllerWritesARunWhileTheRunReconcilerHoldsIt: the forge's
// first look at a new run comes while the run reconciler is creating the
// run's Job. Before, the forge recorded its post in flight in between, so
// the run reconciler's status write was refused (409) and its next
// reconcile created the Job and NetworkPolicy again, both refused as they
// existed (hack/scale: 0.37 refused TauRun writes per run ended in the
// first rows, with 0.3 forge writes a run while it was Pending). Now the
// forge waits for the run reconciler to let the run go, finds its copy
// replaced, and writes nothing; its next look posts the run's new state.
func TestNoControllerWritesARunWhileTheRunReconcilerHoldsIt(t *testing.T) {
	f, created, req := sharingOneRecord(t, "whold", "run/held")

	blocking := &blockingCreates{Client: f.runRec.Client, held: make(chan struct{}), released: make(chan struct{})}
	f.runRec.Client = blocking
	ran := make(chan error, 1)
	go func() {
		res, err := f.runRec.Reconcile(context.Background(), req)
		if err == nil && res.RequeueAfter == 50*time.Millisecond {
			err = fmt.Errorf("the run's status write was refused (a look again after 50ms)")
		}
		ran <- err
	}()
	select {
	case <-blocking.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the run reconciler created no Job")
	}
	counted := &laggingClient{Client: f.r.Client}
	f.r.Client = counted
	forged := make(chan error, 1)
	go func() {
		_, err := f.r.Reconcile(context.Background(), req)
		forged <- err
	}()
	select {
	case err := <-forged:
		t.Fatalf("the forge's reconcile ended (%v) while the run reconciler held the run", err)
	case <-time.After(500 * time.Millisecond):
	}
	if n := counted.patches.Load(); n != 0 {
		t.Fatalf("the forge wrote the run %d times while the run reconciler held it", n)
	}
	close(blocking.released)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if got := f.getRun(t, created.Name); got.Status.Workload == nil || got.Status.Workload.Name == "" {
		t.Fatalf("the run reconciler's write did not record the Job: %+v", got.Status)
	}
	select {
	case <-forged:
	case <-time.After(30 * time.Second):
		t.Fatal("the forge still waits after the run reconciler let the run go")
	}
	if n, calls := counted.patches.Load(), len(f.srv.Calls()); n != 0 || calls != 0 {
		t.Errorf("the forge, from the copy the run reconciler's write replaced: %d status patches sent, %d forge calls; want none", n, calls)
	}
	f.mustReconcileForge(t, created.Name)
	if d := f.posted(); len(d) == 0 || !strings.Contains(strings.Join(d, "\n"), "queued") {
		t.Errorf("the forge's next look posted %q; want the run's queued state", d)
	}
}
