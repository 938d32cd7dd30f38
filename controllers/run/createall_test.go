package run

import (
	"context"
	"sync"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestASubmissionCreatesTheRunsObjectsAtOnce: the Job and the run's other
// objects (its fence) go to the API server together, not one round trip
// after another. Each create waits briefly for another to be in flight:
// one at a time, none ever sees another.
func TestASubmissionCreatesTheRunsObjectsAtOnce(t *testing.T) {
	var mu sync.Mutex
	var kinds []string
	inFlight, most := 0, 0
	faults := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
		mu.Lock()
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		// Long enough for the other create to start on a loaded machine;
		// the wait ends as soon as it does.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			together := most >= 2
			mu.Unlock()
			if together {
				break
			}
		}
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		return c.Create(ctx, o, opts...)
	}}
	run := builders.MakeTauRun("r1", ns).UID("u1").Obj()
	w := newRunWorld(t, faults, run)
	if _, err := w.reconcile(t, run.Name); err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, run.Name); got.Status.Phase != taugridv1.PhaseQueued {
		t.Fatalf("phase %q (%s), want Queued", got.Status.Phase, got.Status.Message)
	}
	t.Logf("created %q, at most %d at once", kinds, most)
	if len(kinds) < 2 {
		t.Fatalf("created %q: the test needs a run with more than its Job", kinds)
	}
	if most < 2 {
		t.Errorf("created %q one at a time, want them at once", kinds)
	}
}

// TestAnObjectLeftByAnEarlierTryIsTheRuns: a submission whose Job the API
// server refused still made the run's other objects; the next try makes
// the Job and takes them as they are.
func TestAnObjectLeftByAnEarlierTryIsTheRuns(t *testing.T) {
	refuse := true
	faults := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
		if _, ok := o.(*batchv1.Job); ok && refuse {
			return apierrors.NewServiceUnavailable("etcd is busy")
		}
		return c.Create(ctx, o, opts...)
	}}
	run := builders.MakeTauRun("r1", ns).UID("u1").Obj()
	w := newRunWorld(t, faults, run)
	if _, err := w.reconcile(t, run.Name); err == nil {
		t.Fatal("a refused Job: no error")
	}
	refuse = false
	if _, err := w.reconcile(t, run.Name); err != nil {
		t.Fatalf("the next try: %v", err)
	}
	got := w.run(t, run.Name)
	if got.Status.Phase != taugridv1.PhaseQueued || len(w.jobs(t)) != 1 {
		t.Errorf("phase %q (%s) with %d Jobs, want Queued with 1", got.Status.Phase, got.Status.Message, len(w.jobs(t)))
	}
}
