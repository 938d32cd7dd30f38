package run

import (
	"context"
	"slices"
	"time"

	"github.com/taugrid/taugrid/runs"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//
// What a worker says changes in the worker, which wakes nothing in the
// manager: the run is looked at again after recheck, soon while a worker
// has not answered yet (no copy, or its Kueue has not tried it), then
// every dispatchedResync. 0: no look needed.
func (r *RunReconciler) explainDispatched(ctx context.Context, wl *kueue.Workload, ex runs.Explanation) (_ runs.Explanation, recheck time.Duration) {
	if r.Clusters == nil || ex.Kind != runs.WaitAdmissionChecks || wl == nil ||
		len(wl.Status.NominatedClusterNames) == 0 || wl.Status.ClusterName != nil && *wl.Status.ClusterName != "" {
		return ex, 0
	}
	waits := runs.ReadWorkerWaits(ctx, wl, func(ctx context.Context, cluster string) (client.Reader, error) {
		return r.podReader(ctx, cluster)
	})
	recheck = dispatchedResync
	if slices.ContainsFunc(waits, unanswered) {
		recheck = dispatchedUnanswered
	}
	return runs.ExplainDispatched(ex, waits), recheck
}

// How soon a dispatched run's workers are read again.
const (
	dispatchedUnanswered = 2 * time.Second
	dispatchedResync     = 30 * time.Second
)

// unanswered is a worker whose Kueue has not said anything of the run's
// copy yet (or that could not be read).
func unanswered(w runs.WorkerWait) bool {
	if w.Err != nil || w.Workload == nil {
		return true
	}
	c := apimeta.FindStatusCondition(w.Workload.Status.Conditions, kueue.WorkloadQuotaReserved)
	return c == nil || c.Status != metav1.ConditionTrue && c.Message == ""
}

// sooner is the earlier of two requeue delays, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}
