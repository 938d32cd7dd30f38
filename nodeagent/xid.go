package nodeagent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// XIDClass says what an XID means for the node.
type XIDClass string

// XID classes, from NVIDIA's XID catalog "immediate action" buckets.
const (
	// XIDFatal: the GPU needs a reset, a reboot or a repair. Latched, tainted.
	XIDFatal XIDClass = "fatal"
	// XIDWarning: worth a look (shown on the condition and as an Event), no taint.
	XIDWarning XIDClass = "warning"
	// XIDIgnore: the application's problem (restart it); counted in metrics only.
	XIDIgnore XIDClass = "ignore"
)

// Action is what a person or a remediation controller should do about a finding;
// the vocabulary follows NVIDIA's catalog and nvmlDeviceGpuRecoveryAction_t.
type Action string

// Actions.
const (
	ActionNone       Action = "NONE"
	ActionRestartApp Action = "RESTART_APP"
	ActionResetGPU   Action = "RESET_GPU"
	ActionRebootNode Action = "REBOOT_NODE"
	ActionInspect    Action = "INSPECT_HARDWARE"
	ActionUnknown    Action = "UNKNOWN"
)

// XIDRule classifies one XID.
type XIDRule struct {
	Class       XIDClass
	Action      Action
	Description string
}

// XIDPolicy classifies XIDs. The zero value classifies everything as a warning;
// use DefaultXIDPolicy.
type XIDPolicy struct {
	rules map[uint64]XIDRule
}

// defaultXIDRules is NVIDIA's XID catalog as encoded by NVSentinel's
// xiderrorsmapping.csv and the EKS agent (see shared/research/gpu-health.md §2).
// Deliberate choices: 63 (a remap *recorded*) and 92 (high single-bit rate) are
// not fatal: the row-remap and ECC checks judge the memory instead. 94 (contained
// ECC) and 109 are application-level, as the device plugin's ignore list has it.
var defaultXIDRules = map[uint64]XIDRule{
	13:  {XIDIgnore, ActionRestartApp, "graphics engine exception"},
	31:  {XIDIgnore, ActionRestartApp, "GPU memory page fault"},
	43:  {XIDIgnore, ActionNone, "GPU stopped processing"},
	45:  {XIDIgnore, ActionNone, "preemptive cleanup"},
	46:  {XIDFatal, ActionResetGPU, "GPU stopped processing (timeout)"},
	48:  {XIDFatal, ActionResetGPU, "double-bit ECC error"},
	54:  {XIDFatal, ActionInspect, "auxiliary power not connected"},
	62:  {XIDFatal, ActionResetGPU, "internal micro-controller halt"},
	63:  {XIDWarning, ActionNone, "row remap or page retirement recorded"},
	64:  {XIDFatal, ActionResetGPU, "row remap or page retirement failure"},
	68:  {XIDIgnore, ActionRestartApp, "NVDEC0 exception"},
	74:  {XIDFatal, ActionResetGPU, "NVLink error"},
	79:  {XIDFatal, ActionRebootNode, "GPU has fallen off the bus"},
	92:  {XIDWarning, ActionNone, "high single-bit ECC error rate"},
	94:  {XIDIgnore, ActionRestartApp, "contained ECC error"},
	95:  {XIDFatal, ActionResetGPU, "uncontained ECC error"},
	109: {XIDIgnore, ActionRestartApp, "context-switch timeout"},
	110: {XIDFatal, ActionResetGPU, "security fault"},
	119: {XIDFatal, ActionResetGPU, "GSP RPC timeout"},
	120: {XIDFatal, ActionResetGPU, "GSP error"},
	123: {XIDFatal, ActionInspect, "SPI PMU RPC write failure"},
	136: {XIDFatal, ActionResetGPU, "link-training failure"},
	140: {XIDFatal, ActionResetGPU, "unrecovered ECC error"},
	143: {XIDFatal, ActionResetGPU, "GPU initialisation failure"},
	144: {XIDFatal, ActionResetGPU, "NVLink error (NVLink5)"},
	145: {XIDFatal, ActionResetGPU, "NVLink error (NVLink5)"},
	146: {XIDFatal, ActionResetGPU, "NVLink error (NVLink5)"},
	147: {XIDFatal, ActionResetGPU, "NVLink error (NVLink5)"},
	148: {XIDFatal, ActionResetGPU, "NVLink error (NVLink5)"},
	149: {XIDFatal, ActionResetGPU, "NVLink error (NVLink5)"},
	150: {XIDFatal, ActionResetGPU, "NVLink error (NVLink5)"},
	151: {XIDFatal, ActionRebootNode, "key-rotation error"},
	154: {XIDWarning, ActionUnknown, "GPU recovery action changed"},
	155: {XIDFatal, ActionResetGPU, "NVLink software error"},
	156: {XIDFatal, ActionResetGPU, "resource retirement event"},
	158: {XIDFatal, ActionResetGPU, "GPU fatal timeout"},
}

// DefaultXIDPolicy returns the catalog-based policy, with fatal and ignore
// overriding it for the XIDs they list (ignore wins when an XID is in both).
// An XID the table does not know is a warning: shown, never tainted.
func DefaultXIDPolicy(fatal, ignore []uint64) XIDPolicy {
	p := XIDPolicy{rules: make(map[uint64]XIDRule, len(defaultXIDRules))}
	for xid, r := range defaultXIDRules {
		p.rules[xid] = r
	}
	for _, xid := range fatal {
		r := p.Classify(xid)
		r.Class = XIDFatal
		if r.Action == ActionNone || r.Action == ActionRestartApp || r.Action == ActionUnknown {
			r.Action = ActionResetGPU
		}
		p.rules[xid] = r
	}
	for _, xid := range ignore {
		r := p.Classify(xid)
		r.Class = XIDIgnore
		p.rules[xid] = r
	}
	return p
}

// Classify returns the rule for xid.
func (p XIDPolicy) Classify(xid uint64) XIDRule {
	if r, ok := p.rules[xid]; ok {
		return r
	}
	if xid == 999 {
		return XIDRule{XIDWarning, ActionUnknown, "unknown XID (NVML reported 999)"}
	}
	return XIDRule{XIDWarning, ActionUnknown, "XID not in the policy table"}
}

// XIDs returns the XIDs of class c that the table names, sorted.
func (p XIDPolicy) XIDs(c XIDClass) []uint64 {
	var out []uint64
	for xid, r := range p.rules {
		if r.Class == c {
			out = append(out, xid)
		}
	}
	slices.Sort(out)
	return out
}

// ParseXIDList parses "48,79, 94" (empty is none).
func ParseXIDList(s string) ([]uint64, error) {
	var out []uint64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("XID %q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
