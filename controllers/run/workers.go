package run

import (
	"context"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// WorkerResync is how often a run dispatched to a worker cluster is looked
// at while it holds quota: no watch on the worker says when its pods
// change, and the Job's mirrored status says only when it ends.
const WorkerResync = 2 * time.Second

// The worker clients are built from the kubeconfig Secrets that the
// MultiKueueClusters name (Secrets are read already, for git credentials).
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=multikueueclusters,verbs=get

// dispatchedTo is the worker cluster the attempt runs on: the one its
// Workload names, else the one recorded (a Workload evicted from a worker
// names none, yet the attempt's pods are still there).
func dispatchedTo(run *taugridv1.TauRun, wl *kueue.Workload) string {
	if wl != nil && wl.Status.ClusterName != nil {
		return *wl.Status.ClusterName
	}
	if run.Status.Workload != nil {
		return run.Status.Workload.Cluster
	}
	return ""
}

// podReader reads the pods, nodes and events of the cluster an attempt
// runs on: the local one through the cache, a worker through its own
// client.
func (r *RunReconciler) podReader(ctx context.Context, cluster string) (client.Reader, error) {
	if cluster == "" || r.Clusters == nil {
		return r.Client, nil
	}
	p, err := r.Clusters.PodsOf(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return p.Reader, nil
}

// recordCluster records on the run and its attempt the worker the attempt
// was dispatched to.
func recordCluster(run *taugridv1.TauRun, cluster string) {
	if cluster == "" || run.Status.Workload == nil {
		return
	}
	run.Status.Workload.Cluster = cluster
	if n := len(run.Status.Attempts); n > 0 {
		run.Status.Attempts[n-1].Cluster = cluster
	}
}

// recheckFor is how soon a run in phase is looked at again, when due is
// when a deadline or a GPU reading falls due (0: none). A run holding
// quota on the local cluster is resynced (progressResync) only when
// nothing else is due: its pods and Job have watches, and the resync is a
// net under them. A dispatched one is looked at every WorkerResync
// whatever else is due: nothing watches its worker's pods, and a start
// deadline minutes away once kept it Admitted that long after its pod ran
// (the mirrored Job's status updates used to wake it; they no longer do,
// ChangesWhatARunReads).
func recheckFor(run *taugridv1.TauRun, phase taugridv1.RunPhase, due time.Duration) time.Duration {
	switch {
	case phase != taugridv1.PhaseAdmitted && phase != taugridv1.PhaseRunning:
		return due
	case run.Status.Workload != nil && run.Status.Workload.Cluster != "":
		return sooner(due, WorkerResync)
	case due == 0:
		return progressResync
	}
	return due
}
