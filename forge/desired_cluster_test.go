package forge_test

import (
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
)

// onWorker records the run's attempt as dispatched to a worker cluster.
func onWorker(cluster string) func(*taugridv1.TauRun) {
	return func(r *taugridv1.TauRun) {
		r.Status.Workload = &taugridv1.WorkloadStatus{Kind: "Job", Name: r.Name + "-1", Queue: "runs", Cluster: cluster}
	}
}

// A dispatched run's commit status names the worker cluster it is on, in
// every phase that has one, before the failure's reason (which the
// forge's limit may cut), and the check run's summary names it too.
func TestADispatchedRunsStatusNamesItsCluster(t *testing.T) {
	long := strings.Repeat("CUDA error: an illegal memory access was encountered; ", 5)
	cases := map[string]struct {
		run  *taugridv1.TauRun
		desc string
	}{
		"admitted":  {aRun(taugridv1.PhaseAdmitted, onWorker("large")), "admitted in runs: starting on cluster large"},
		"running":   {aRun(taugridv1.PhaseRunning, onWorker("large")), "running on cluster large"},
		"succeeded": {aRun(taugridv1.PhaseSucceeded, onWorker("large")), "succeeded on cluster large"},
		"failed, its long reason cut after the cluster": {aRun(taugridv1.PhaseFailed, onWorker("us-east-gpu-pool-2"), withMessage(long)),
			"failed on cluster us-east-gpu-pool-2: " + long},
		"on the controller's own cluster, no cluster is named": {aRun(taugridv1.PhaseRunning, inQueue("runs", "")), "running"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := forge.Desired(c.run)
			want := forge.Shorten(c.desc, forge.MaxDescription)
			if s.Description != want {
				t.Errorf("description %q, want %q", s.Description, want)
			}
			if len([]rune(s.Description)) > forge.MaxDescription {
				t.Errorf("description of %d characters, over the forge's %d", len([]rune(s.Description)), forge.MaxDescription)
			}
			if w := c.run.Status.Workload; w.Cluster != "" && (!strings.Contains(s.Description, "cluster "+w.Cluster) || !strings.Contains(s.Summary, "**cluster** `"+w.Cluster+"`")) {
				t.Errorf("the status does not name cluster %s: %q; summary %q", w.Cluster, s.Description, s.Summary)
			}
		})
	}
}
