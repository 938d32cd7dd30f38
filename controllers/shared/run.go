package shared

import (
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
)

// KueueJobUID is the label Kueue puts on a Workload: its job's UID.
const KueueJobUID = "kueue.x-k8s.io/job-uid"

// AttemptRun is what render needs to know of one attempt of a run: the
// attempts before it decide which nodes it avoids, and whether it is a
// retry that resumes from a checkpoint. The run reconciler renders with it,
// and evidence re-renders with it, so both agree byte for byte.
func AttemptRun(run *taugridv1.TauRun, attempt int, policyCommit string) render.Run {
	earlier := run.Status.Attempts[:min(max(attempt-1, 0), len(run.Status.Attempts))]
	meta := render.Run{Name: run.Name, Repository: run.Spec.Repository, Commit: run.Spec.Commit,
		Target: run.Spec.Target, Attempt: attempt, PolicyCommit: policyCommit, AvoidNodes: avoidedNodes(earlier)}
	if n := len(earlier); n > 0 {
		meta.RetryReason = earlier[n-1].FailureClass
		meta.Resume = true
	}
	return meta
}

// avoidedNodes are the nodes where earlier attempts hit a GPU fault or lost
// their node.
func avoidedNodes(attempts []taugridv1.Attempt) []string {
	var nodes []string
	for _, a := range attempts {
		if a.FailureClass == string(taugridv1.FailureGPUFault) || a.FailureClass == string(taugridv1.FailureNodeLost) {
			for _, n := range a.Nodes {
				if !slices.Contains(nodes, n) {
					nodes = append(nodes, n)
				}
			}
		}
	}
	return nodes
}

func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
