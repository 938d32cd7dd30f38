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
// no worker admitted yet, in the workers' words (runs.ExplainDispatched).
// Only such a look reads a worker that may never run the run: one Get of
// its copy of the Workload per nominated worker. None for a run that
// waits for anything else, that a worker took already (the manager only
// has to mark the check ready), or on a single cluster.
func (r *RunReconciler) explainDispatched(ctx context.Context, wl *kueue.Workload, ex runs.Explanation) runs.Explanation {
	if r.Clusters == nil || ex.Kind != runs.WaitAdmissionChecks || wl == nil ||
		len(wl.Status.NominatedClusterNames) == 0 || wl.Status.ClusterName != nil && *wl.Status.ClusterName != "" {
		return ex
	}
	waits := runs.ReadWorkerWaits(ctx, wl, func(ctx context.Context, cluster string) (client.Reader, error) {
		return r.podReader(ctx, cluster)
	})
	return runs.ExplainDispatched(ex, waits)
}
