package shared

// What a run's status says, read the same way by every controller that
// decides by it.

import (
	"slices"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndedAttempts are the attempts whose end the status shows: those with
// an end time, and the last one once the run is over.
func EndedAttempts(run *taugridv1.TauRun) []int {
	var out []int
	for i, a := range run.Status.Attempts {
		if a.EndTime != nil || (i == len(run.Status.Attempts)-1 && run.Status.Phase.Final()) {
			out = append(out, a.Number)
		}
	}
	return out
}

// Sealing reports a run whose ended attempts wait for the evidence
// controller.
func Sealing(run *taugridv1.TauRun) bool {
	c := apimeta.FindStatusCondition(run.Status.Conditions, ConditionEvidence)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonSealing
}

// Since is when the run last entered phase.
func Since(run *taugridv1.TauRun, phase taugridv1.RunPhase) time.Time {
	for i := len(run.Status.Phases) - 1; i >= 0; i-- {
		if run.Status.Phases[i].Phase == phase {
			return run.Status.Phases[i].Time.Time
		}
	}
	return time.Time{}
}

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

// PodTerminated reports a pod whose containers have all stopped for good.
func PodTerminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
