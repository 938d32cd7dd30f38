package nodeagent

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Annotations on the node.
const (
	// AnnotationState holds the agent's latched faults as JSON, so that a restarted
	// agent (or another node's circuit breaker) can read them.
	AnnotationState = "taugrid.dev/gpu-health"
	// AnnotationResetAt is set by an operator (RFC 3339 time) after resetting the
	// GPUs in a way the agent cannot see: faults latched before it get evidence of
	// recovery, and clear after the healthy window.
	AnnotationResetAt = "taugrid.dev/gpu-reset-at"
)

// persisted is the state annotation's content.
type persisted struct {
	BootID    string         `json:"bootID,omitempty"`
	TaintedAt *time.Time     `json:"taintedAt,omitempty"`
	GPUs      map[string]int `json:"gpus,omitempty"` // UUID -> index, for naming a GPU that disappears
	Faults    []Fault        `json:"faults,omitempty"`
}

func (p persisted) encode() string {
	b, err := json.Marshal(p)
	if err != nil {
		return "" // cannot happen: plain data
	}
	return string(b)
}

func decodePersisted(s string) (persisted, error) {
	var p persisted
	if s == "" {
		return p, nil
	}
	err := json.Unmarshal([]byte(s), &p)
	return p, err
}

// resetAckAt reads the operator's reset acknowledgement (zero if absent or malformed).
func resetAckAt(n *corev1.Node) time.Time {
	if n == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, n.Annotations[AnnotationResetAt])
	if err != nil {
		return time.Time{}
	}
	return t
}
