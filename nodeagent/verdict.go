package nodeagent

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// Names shared with the rest of TauGrid: the condition is
// taugridv1.ConditionGPUHealthy, which the reconcilers and tau inspect read.
const (
	ConditionType = corev1.NodeConditionType(taugridv1.ConditionGPUHealthy)
	TaintKey      = "taugrid.dev/gpu-unhealthy"
	TaintEffect   = corev1.TaintEffectNoSchedule
)

// maxListed bounds how many GPUs a condition message names.
const maxListed = 4

// Verdict is what the node should say about its GPUs.
type Verdict struct {
	Status  corev1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message"`
	Taint   bool                   `json:"taint"` // keep new work off the node
}

// VerdictFor derives the node's verdict from the latched state and this cycle's
// results: False (and tainted) while any fault is latched; else Unknown while
// anything could not be read; else True, naming held warnings. Pure.
func VerdictFor(st State, results []Result) Verdict {
	if len(st.Faults) > 0 {
		lines := make([]string, len(st.Faults))
		for i, f := range st.Faults {
			lines[i] = describe(f.Result) + "; action " + string(f.Action)
			if f.Evidence != "" {
				lines[i] += "; recovering: " + f.Evidence
			}
		}
		return Verdict{Status: corev1.ConditionFalse, Reason: st.Faults[0].Reason, Message: joinLines(lines), Taint: true}
	}
	var unknown []Result
	gpus := map[int]bool{}
	for _, r := range results {
		if r.Severity == SeverityUnknown {
			unknown = append(unknown, r)
		}
		if r.GPU != NodeGPU {
			gpus[r.GPU] = true
		}
	}
	if len(unknown) > 0 {
		lines := make([]string, len(unknown))
		for i, r := range unknown {
			lines[i] = describe(r)
		}
		msg := joinLines(lines) + "; the GPUs are not fully monitored"
		if unknown[0].Check == CheckNVML {
			msg = joinLines(lines) + "; the GPUs are not monitored"
		}
		return Verdict{Status: corev1.ConditionUnknown, Reason: unknown[0].Reason, Message: msg}
	}
	if len(st.Held) > 0 {
		lines := make([]string, len(st.Held))
		for i, h := range st.Held {
			lines[i] = describe(h.Result)
		}
		return Verdict{Status: corev1.ConditionTrue, Reason: ReasonDegraded, Message: joinLines(lines)}
	}
	return Verdict{Status: corev1.ConditionTrue, Reason: ReasonHealthy, Message: fmt.Sprintf("%d GPUs healthy", len(gpus))}
}

// describe names the GPU (index and UUID) and the check: "GPU 3 (GPU-…): xid: …".
func describe(r Result) string {
	who := "node"
	switch {
	case r.GPU != NodeGPU && r.UUID != "":
		who = fmt.Sprintf("GPU %d (%s)", r.GPU, r.UUID)
	case r.GPU != NodeGPU:
		who = fmt.Sprintf("GPU %d", r.GPU)
	}
	return fmt.Sprintf("%s: %s: %s", who, r.Check, r.Message)
}

// joinLines joins up to maxListed lines and says how many more there are.
func joinLines(lines []string) string {
	if len(lines) <= maxListed {
		return strings.Join(lines, "; ")
	}
	return strings.Join(lines[:maxListed], "; ") + fmt.Sprintf("; and %d more", len(lines)-maxListed)
}
