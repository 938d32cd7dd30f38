package reconciler

import (
	"context"

	"github.com/taugrid/taugrid/runs"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The copies of a dispatched Workload are read in the workers it was
// nominated to, with the credentials of their MultiKueueClusters.
// (In each worker, that identity needs get on kueue.x-k8s.io workloads,
// which MultiKueue's own needs already.)

// explainDispatched tells a queued run that the manager dispatched, and
// no worker admitted yet, in the workers' words (runs.ExplainDispatched):
// one read per nominated worker, none for a run that waits for anything
// else or on a single cluster.
func (r *RunReconciler) explainDispatched(ctx context.Context, wl *kueue.Workload, ex runs.Explanation) runs.Explanation {
	if r.Clusters == nil || ex.Kind != runs.WaitAdmissionChecks || wl == nil || len(wl.Status.NominatedClusterNames) == 0 {
		return ex
	}
	waits := runs.ReadWorkerWaits(ctx, wl, func(ctx context.Context, cluster string) (client.Reader, error) {
		return r.podReader(ctx, cluster)
	})
	return runs.ExplainDispatched(ex, waits)
}
