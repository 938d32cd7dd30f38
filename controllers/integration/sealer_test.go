package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/shared"
)

// countingStore counts every call into the store.
type countingStore struct {
	evidence.Store
	calls atomic.Int32
}

func (s *countingStore) Manifest(ctx context.Context, k evidence.Key) ([]byte, error) {
	s.calls.Add(1)
	return s.Store.Manifest(ctx, k)
}

func (s *countingStore) PutBlob(ctx context.Context, d string, b []byte) error {
	s.calls.Add(1)
	return s.Store.PutBlob(ctx, d, b)
}

func (s *countingStore) PutManifest(ctx context.Context, k evidence.Key, raw []byte) error {
	s.calls.Add(1)
	return s.Store.PutManifest(ctx, k, raw)
}

// The run reconciler's workers only record an attempt's end: collecting
// and storing its bundle (Event lists, pod logs, the store) is the
// evidence controller's, on workers of its own, so a slow seal holds no
// other run's phase.
func TestTheRunReconcilerRecordsTheEndAndTheEvidenceControllerSeals(t *testing.T) {
	f := newEvidenceFixture(t, "ev9")
	store := &countingStore{Store: f.store}
	f.recorder.Store = store
	f.research.tag("run/handoff")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/handoff")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	f.startedPod(t, run.Name, 0, "ok\n")
	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))

	ctx := context.Background()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: run.Name}}
	got := &taugridv1.TauRun{}
	for deadline := time.Now().Add(30 * time.Second); got.Status.Phase != taugridv1.PhaseSucceeded; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run is %s (%s), want Succeeded", got.Status.Phase, got.Status.Message)
		}
		if _, err := f.runRec.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.calls.Load(); n != 0 {
		t.Errorf("the run reconciler made %d evidence store calls, want none", n)
	}
	c := apimeta.FindStatusCondition(got.Status.Conditions, shared.ConditionEvidence)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != shared.ReasonSealing {
		t.Fatalf("EvidenceSealed = %+v, want False Sealing until the evidence controller seals", c)
	}
	if has, err := evidence.Has(ctx, f.store, evidence.Key{Namespace: f.ns, Run: run.Name, Attempt: 1}); err != nil || has {
		t.Fatalf("bundle sealed by the run reconciler (%v, %v)", has, err)
	}
	// An ended run waiting for its seal is looked at again soon, to release
	// what it holds once sealed.
	if res, err := f.runRec.Reconcile(ctx, req); err != nil || res.RequeueAfter == 0 || res.RequeueAfter > runctrl.SealRecheck {
		t.Errorf("while sealing: %+v, %v; want a look again within %s", res, err, runctrl.SealRecheck)
	}

	if _, err := f.recorder.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
		t.Fatal(err)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, shared.ConditionEvidence) || got.Status.Phase != taugridv1.PhaseSucceeded {
		t.Errorf("after the evidence controller: phase %s, EvidenceSealed %+v", got.Status.Phase, apimeta.FindStatusCondition(got.Status.Conditions, shared.ConditionEvidence))
	}
	f.bundle(t, run.Name)
	if res, err := f.runRec.Reconcile(ctx, req); err != nil || res.RequeueAfter != 0 {
		t.Errorf("once sealed: %+v, %v; want nothing more to do", res, err)
	}
}

// The seal wakes the run reconciler, which ignores its runs' other status
// changes: its ended attempts are released at once, not at the backstop.
func TestTheSealOfARunsEvidenceWakesItsReconciler(t *testing.T) {
	withEvidence := func(status metav1.ConditionStatus, reason string) *taugridv1.TauRun {
		run := &taugridv1.TauRun{}
		run.Status.Phase = taugridv1.PhaseSucceeded
		apimeta.SetStatusCondition(&run.Status.Conditions, metav1.Condition{Type: shared.ConditionEvidence, Status: status, Reason: reason})
		return run
	}
	waiting, sealed := withEvidence(metav1.ConditionFalse, shared.ReasonSealing), withEvidence(metav1.ConditionTrue, shared.ReasonEvidenceSealed)
	other := waiting.DeepCopy()
	other.Status.Message = "a new message"
	p := runctrl.SealedNow()
	for name, c := range map[string]struct {
		old, cur *taugridv1.TauRun
		want     bool
	}{
		"sealed":              {waiting, sealed, true},
		"still sealing":       {waiting, other, false},
		"sealed before":       {sealed, sealed, false},
		"a new attempt seals": {sealed, waiting, false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.cur}); got != c.want {
			t.Errorf("%s: wakes = %v, want %v", name, got, c.want)
		}
	}
	if p.Create(event.CreateEvent{Object: sealed}) {
		t.Error("a create passes the seal predicate; the For predicate's others see creates")
	}
}
