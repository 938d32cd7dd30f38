package integration

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	runctrl "github.com/taugrid/taugrid/controllers/run"
)

// jobCreates counts the Job creates that reach the API server.
type jobCreates struct {
	client.Client
	n *atomic.Int32
}

func (c jobCreates) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	if _, ok := o.(*batchv1.Job); ok {
		c.n.Add(1)
	}
	return c.Client.Create(ctx, o, opts...)
}

// A cache that has seen the run's Job (its watch event wakes the run) but
// not yet the run's own status write shows the run as not submitted. The
// run reconciler submits once and says Submitted once, after the status
// that makes it true is stored: no second Create answered AlreadyExists,
// no duplicate event before a Conflict.
func TestALaggingCacheGetsOneSubmissionAndOneSubmittedEvent(t *testing.T) {
	f := newRunFixture(t, "sub1")
	ctx := context.Background()
	f.research.tag("run/once")
	f.poll(t)
	before := f.runOf(t, "refs/tags/run/once") // the copy the cache still holds
	key := types.NamespacedName{Namespace: f.ns, Name: before.Name}
	req := reconcile.Request{NamespacedName: key}

	var creates atomic.Int32
	rec := events.NewFakeRecorder(100)
	f.runRec.Recorder = rec
	f.runRec.Client = jobCreates{Client: k8s, n: &creates}
	if _, err := f.runRec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	f.runRec.Client = jobCreates{Client: laggingCache{Client: k8s, old: before}, n: &creates}
	for range 3 {
		if _, err := f.runRec.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	f.runRec.Client = jobCreates{Client: k8s, n: &creates}
	if _, err := f.runRec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &taugridv1.TauRun{}
	if err := k8s.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}

	if n := creates.Load(); n != 1 {
		t.Errorf("%d Job creates, want 1", n)
	}
	var submitted []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, runctrl.ReasonSubmitted) {
			submitted = append(submitted, e)
		}
	}
	if len(submitted) != 1 {
		t.Errorf("Submitted events %q, want one", submitted)
	}
	if len(got.Status.Attempts) != 1 || got.Status.Workload == nil {
		t.Errorf("status %+v, want one attempt submitted", got.Status)
	}
}
