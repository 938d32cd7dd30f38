// Package gpus is the wire format of the node agent's /gpus endpoint: each
// GPU of a node, who holds it and its minute-by-minute utilisation. The
// agent serves it and the controller reads it; the package holds types
// only, so the controller links no NVML (cgo) code to read it.
package gpus

import "time"

// Path is where the agent serves a Report; ?namespace= narrows it to one
// tenant's GPUs and points.
const Path = "/gpus"

// Audience is the audience of the tokens the controller reads Path with:
// the agent accepts no other there, and the API server accepts none of
// them, so a token sent to an agent's address (which a pod of another
// namespace may hold for a moment after the agent's pod is gone) cannot
// act as the controller on the cluster. The chart projects it into the
// controller's pod (cmd/tau-controller --node-agent-token-file).
const Audience = "taugrid.dev/node-agent"

// Holder is the container a GPU is allocated to, as the kubelet tells it.
type Holder struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
}

// Point is one GPU over one step (or the part of it one holder had it).
type Point struct {
	Start time.Time `json:"start"`
	// Pct is the mean utilisation over the samples of the step, in percent.
	Pct     float64 `json:"pct"`
	Samples int     `json:"samples"`
	// MemoryUsedBytes is the most memory used in the step.
	MemoryUsedBytes uint64 `json:"memoryUsedBytes"`
	Holder          Holder `json:"holder"`
}

// GPU is one GPU's latest reading and its recent history.
type GPU struct {
	Index            int       `json:"index"`
	UUID             string    `json:"uuid"`
	Name             string    `json:"name,omitempty"`
	At               time.Time `json:"at"`
	UtilizationPct   uint32    `json:"utilizationPct"`
	MemoryUsedBytes  uint64    `json:"memoryUsedBytes"`
	MemoryTotalBytes uint64    `json:"memoryTotalBytes"`
	Holder           Holder    `json:"holder"`
	History          []Point   `json:"history"`
}

// Report is what the agent serves at Path: every GPU it can read the
// utilisation of, with whom it is allocated to, over the last window.
type Report struct {
	Node        string `json:"node"`
	StepSeconds int    `json:"stepSeconds"`
	GPUs        []GPU  `json:"gpus"`
}
