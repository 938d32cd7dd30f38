package sealing

import (
	"context"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// status.conditions is one list, shared with the run reconciler, which a
// merge patch replaces whole: a seal working from a copy older than the
// run reconciler's last write is refused (Conflict) rather than put the
// old list back, and the retry, reading the run again, keeps both.
func TestASealFromAStaleCopyDoesNotEraseTheRunReconcilersCondition(t *testing.T) {
	ctx := context.Background()
	var stale *taugridv1.TauRun
	faults := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if run, ok := obj.(*taugridv1.TauRun); ok && stale != nil {
			stale.DeepCopyInto(run)
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	w := newSealWorld(t, nil)
	c := sharedtest.Builder(researchRepo(), hfSecret(), sealingRun().Obj(), attemptJob(), attemptWorkload()).WithInterceptorFuncs(faults).Build()
	w.c, w.e.Client, w.e.APIReader = c, c, c
	old := w.run(t)
	newer := old.DeepCopy()
	const said = "the run reconciler's newest word"
	shared.SetCondition(&newer.Status.Conditions, 1, sharedtest.Now, taugridv1.ConditionReady, metav1.ConditionTrue, "Succeeded", said)
	if err := c.Status().Patch(ctx, newer, client.MergeFrom(old)); err != nil {
		t.Fatal(err)
	}

	stale = old
	if _, err := w.e.Reconcile(ctx, runR); !apierrors.IsConflict(err) {
		t.Errorf("sealing from a stale copy: %v, want a Conflict", err)
	}
	stale = nil
	if _, err := w.e.Reconcile(ctx, runR); err != nil {
		t.Fatal(err)
	}
	got := w.run(t)
	if cond := apimeta.FindStatusCondition(got.Status.Conditions, taugridv1.ConditionReady); cond == nil || cond.Message != said {
		t.Errorf("Ready = %+v: the seal erased the run reconciler's condition", cond)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, shared.ConditionEvidence) {
		t.Errorf("EvidenceSealed = %+v, want True", apimeta.FindStatusCondition(got.Status.Conditions, shared.ConditionEvidence))
	}
	if d := w.sealed(t); len(d) != 1 {
		t.Errorf("sealed %q, want attempt 1's bundle once", d)
	}
}
