package server

import (
	"context"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/runs"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runReader is what reads a run's cluster for the runs API: local, the
// given reader and the API's log source; for a run on a worker, its pods,
// nodes and events (with the manager's) and logs from that worker.
func (a *RunsAPI) runReader(ctx context.Context, run *taugridv1.TauRun, local client.Reader) (client.Reader, runs.LogSource, error) {
	cluster := ""
	if run.Status.Workload != nil {
		cluster = run.Status.Workload.Cluster
	}
	if cluster == "" || a.Clusters == nil {
		return local, a.Logs, nil
	}
	p, err := a.Clusters.PodsOf(ctx, cluster)
	if err != nil {
		return nil, nil, err
	}
	return clusters.Routed(local, p.Reader), runs.PodLogs{Pods: p.Logs}, nil
}

// AttemptPod is the first pod, by name, of the run's latest attempt, read
// from the cluster the attempt runs on.
func (a *RunsAPI) AttemptPod(ctx context.Context, run *taugridv1.TauRun) (*corev1.Pod, error) {
	rd, _, err := a.runReader(ctx, run, a.Client)
	if err != nil {
		return nil, err
	}
	return runs.AttemptPod(ctx, rd, run)
}

// Diagnosis is the run's diagnosis, its pods, nodes and events read from
// the cluster its attempt runs on (events from the manager too).
func (a *RunsAPI) Diagnosis(ctx context.Context, run *taugridv1.TauRun) (*runs.Diagnosis, error) {
	rd, logs, err := a.runReader(ctx, run, a.reader())
	if err != nil {
		return nil, err
	}
	return runs.Diagnose(ctx, rd, logs, run)
}
