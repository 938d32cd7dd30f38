package main

import (
	"bytes"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// A run dispatched to a worker cluster says which, for the attempt running
// now and for each earlier one; a run on one cluster says nothing of it.
func TestStatusNamesTheClusterEachAttemptRanOn(t *testing.T) {
	run := &taugridv1.TauRun{Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseRunning,
		Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: "mnist-2", Queue: "runs", Cluster: "large"},
		Attempts: []taugridv1.Attempt{
			{Number: 1, FailureClass: "NodeLost", Reason: "node gpu-7 is gone", Cluster: "small"},
			{Number: 2, Cluster: "large"},
		}}}
	var out bytes.Buffer
	printRun(&out, run)
	for _, want := range []string{"workload: Job mnist-2 in queue runs, on cluster large", "1  NodeLost       node gpu-7 is gone, on cluster small"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tau status lacks %q:\n%s", want, out.String())
		}
	}
	run.Status.Workload.Cluster, run.Status.Attempts = "", nil
	out.Reset()
	printRun(&out, run)
	if strings.Contains(out.String(), "cluster") {
		t.Errorf("a run on one cluster names a cluster:\n%s", out.String())
	}
}
