package reconciler

import (
	"fmt"
	"slices"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ReasonSealing: an attempt ended and the evidence controller has not
// sealed its bundle yet.
const ReasonSealing = "Sealing"

// evidenceWorkers is how many runs the evidence controller seals at once.
// Sealing waits on the API server (a field-selected Event list per object)
// and on pod logs; it has its own workers so that it never holds a run
// reconciler's worker, and so other runs' phases, while it waits.
const evidenceWorkers = 4

// sealRecheck is how often an ended attempt whose bundle is not sealed yet
// is looked at for its release: its pods are what the bundle is read from.
const sealRecheck = time.Second

// recordEnd is the run reconciler's evidence hook, called before it patches
// the status: it links the evidence page and marks the attempts that just
// ended as to be sealed (EvidenceSealed=False, Sealing), which hands them
// to the evidence controller. It does no I/O. A nil recorder does nothing.
func (r *RunReconciler) recordEnd(base, run *taugridv1.TauRun) {
	if r.Evidence == nil {
		return
	}
	r.Evidence.link(run)
	before := endedAttempts(base)
	var ended []int
	for _, n := range endedAttempts(run) {
		if !slices.Contains(before, n) {
			ended = append(ended, n)
		}
	}
	if len(ended) == 0 {
		return
	}
	r.Evidence.setCondition(run, metav1.ConditionFalse, ReasonSealing, fmt.Sprintf("sealing the evidence of attempt %d", ended[len(ended)-1]))
}

// sealing reports a run whose ended attempts wait for the evidence
// controller.
func sealing(run *taugridv1.TauRun) bool {
	c := apimeta.FindStatusCondition(run.Status.Conditions, ConditionEvidence)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonSealing
}

// afterSeal is result, looked at again within sealRecheck: what the
// run's ended attempts hold is released once their bundles are sealed.
func afterSeal(result reconcile.Result) reconcile.Result {
	if result.RequeueAfter == 0 || result.RequeueAfter > sealRecheck {
		result.RequeueAfter = sealRecheck
	}
	return result
}
