package sealing

import (
	"context"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taugrid/taugrid/controllers/shared"
)

// releaseOnWorker lets go of attempt n's Job on its worker once its bundle
// is stored (or the store failed: a hold must not wait on the store). A
// worker that cannot be reached keeps the hold until the janitor's next
// sweep; a Job already gone was never held or is released.
func (e *EvidenceRecorder) releaseOnWorker(ctx context.Context, run *taugridv1.TauRun, n int) {
	if e.Clusters == nil || n < 1 || n > len(run.Status.Attempts) {
		return
	}
	a := run.Status.Attempts[n-1]
	if a.Cluster == "" || a.Workload == "" {
		return
	}
	// The ended attempt's kind: the run's workload says it while it is
	// the current one; between attempts it is gone, so both are tried (a
	// worker without KubeRay has no RayJob to release).
	kinds := []string{"Job", "RayJob"}
	if w := run.Status.Workload; w != nil && w.Name == a.Workload && w.Kind != "" {
		kinds = []string{w.Kind}
	}
	var err error
	for _, kind := range kinds {
		if err = shared.PatchWorkerJob(ctx, e.Clusters, a.Cluster, shared.HeldObject(kind, run.Namespace, a.Workload), false); !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			break
		}
	}
	if client.IgnoreNotFound(err) != nil && !meta.IsNoMatchError(err) {
		log.FromContext(ctx).Info("cannot release the attempt's Job on its worker; the janitor will", "cluster", a.Cluster, "job", a.Workload, "error", err.Error())
	}
}
