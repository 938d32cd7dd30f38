package run

import (
	"context"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taugrid/taugrid/controllers/shared"
)

// holdKey is one attempt of one run.
type holdKey struct {
	run     types.UID
	attempt int
}

// holdOnWorker holds the current attempt's Job on the worker it was
// dispatched to, once per attempt (a controller restart patches it once
// more, which changes nothing). The worker's Job appears a moment after
// the dispatch; until then, and while the worker cannot be reached, the
// next look tries again. It never fails the run's reconcile: a run is
// followed whether or not its evidence is held.
func (r *RunReconciler) holdOnWorker(ctx context.Context, run *taugridv1.TauRun, cluster string) {
	w := run.Status.Workload
	n := len(run.Status.Attempts)
	if cluster == "" || r.Clusters == nil || r.Evidence == nil || w == nil || n == 0 || run.Status.Attempts[n-1].EndTime != nil {
		return
	}
	key := holdKey{run: run.UID, attempt: n}
	held := shared.MemoOf(&r.held)
	if _, ok := held.Get(key); ok {
		return
	}
	switch err := shared.PatchWorkerJob(ctx, r.Clusters, cluster, shared.HeldObject(w.Kind, run.Namespace, w.Name), true); {
	case err == nil:
		held.Put(key, struct{}{})
	case !apierrors.IsNotFound(err):
		log.FromContext(ctx).Info("cannot hold the attempt's Job on its worker yet", "cluster", cluster, "job", w.Name, "error", err.Error())
	}
}

// forgetHolds drops the entries of the run's ended attempts: the
// evidence controller releases what they hold.
func (r *RunReconciler) forgetHolds(run *taugridv1.TauRun, ended []int) {
	held := shared.MemoOf(&r.held)
	for _, n := range ended {
		held.Forget(holdKey{run: run.UID, attempt: n})
	}
}
