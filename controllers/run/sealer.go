package run

import (
	"fmt"
	"slices"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/shared"
)

// SealRecheck is how long an ended attempt whose bundle is not sealed yet
// waits, at most, to be looked at for its release (its pods are what the
// bundle is read from). The seal itself wakes the run (sealedNow): this is
// the backstop. hack/scale: at a one-second recheck, 5,000 ended runs
// waiting for their seals were 1,700 reconciles a second, each a copy of
// the run from the cache and nothing else.
const SealRecheck = time.Minute

// SealedNow passes the update that seals a run's evidence, so the run
// reconciler, which ignores its runs' other status changes, releases what
// the ended attempts hold at once.
func SealedNow() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*taugridv1.TauRun)
			cur, okNew := e.ObjectNew.(*taugridv1.TauRun)
			return okOld && okNew && shared.Sealing(old) && !shared.Sealing(cur)
		},
	}
}

// recordEnd is the run reconciler's evidence hook, called before it patches
// the status: it links the evidence page and marks the attempts that just
// ended as to be sealed (EvidenceSealed=False, Sealing), which hands them
// to the evidence controller. It does no I/O. A nil Evidence does nothing.
func (r *RunReconciler) recordEnd(base, run *taugridv1.TauRun) {
	if r.Evidence == nil {
		return
	}
	if u := r.Evidence.RunURL(run.Namespace, run.Name, run.CreationTimestamp.Time); u != "" {
		run.Status.EvidenceURL = u
	}
	before := shared.EndedAttempts(base)
	var ended []int
	for _, n := range shared.EndedAttempts(run) {
		if !slices.Contains(before, n) {
			ended = append(ended, n)
		}
	}
	if len(ended) == 0 {
		return
	}
	r.setCondition(run, shared.ConditionEvidence, metav1.ConditionFalse, shared.ReasonSealing, fmt.Sprintf("sealing the evidence of attempt %d", ended[len(ended)-1]))
}

// afterSeal is result, looked at again within sealRecheck: what the
// run's ended attempts hold is released once their bundles are sealed
// (sealedNow wakes the run then).
func afterSeal(result reconcile.Result) reconcile.Result {
	if result.RequeueAfter == 0 || result.RequeueAfter > SealRecheck {
		result.RequeueAfter = SealRecheck
	}
	return result
}
