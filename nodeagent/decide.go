package nodeagent

import (
	"cmp"
	"slices"
	"time"
)

// State is what the agent carries from one cycle to the next. Faults (with
// BootID) are persisted on the Node, so a restarted agent neither forgets a fault
// nor clears it without evidence.
type State struct {
	Faults []Fault `json:"faults,omitempty"`
	// Held are warnings shown until they have been absent for the hold time.
	Held []Held `json:"-"`
}

// Fault is a latched fatal result.
type Fault struct {
	Result
	Since  time.Time `json:"since"`
	BootID string    `json:"bootID,omitempty"` // the boot the fault was last seen in
	// GoneAt is when the GPU was last seen gone (missing, lost, or NVML not
	// loadable) after the fault: its return is evidence of a reset.
	GoneAt time.Time `json:"goneAt,omitzero"`
	// Evidence says what showed the GPU recovered, and since when; the fault
	// clears after a healthy window from then.
	Evidence   string    `json:"evidence,omitempty"`
	EvidenceAt time.Time `json:"evidenceAt,omitzero"`
}

// Held is a warning and when it was last seen.
type Held struct {
	Result
	LastSeen time.Time
}

// Evidence is what the agent knows about the node's life besides NVML.
type Evidence struct {
	BootID     string    // the node's current boot ID ("" if unknown)
	ResetAckAt time.Time // an operator's "GPUs were reset at" acknowledgement
}

// RecoveryPolicy says how faults and warnings clear.
type RecoveryPolicy struct {
	// Window is how long a GPU must stay free of fatal results after evidence of
	// recovery (a reboot, a reset, its return) before its faults clear.
	Window time.Duration
	// WarningHold is how long a warning stays shown after it was last seen.
	WarningHold time.Duration
}

// Decide folds one cycle's results into the state: fatal results latch, faults
// clear only after evidence of recovery and a healthy window, warnings are held
// for a while. It is a pure function.
func Decide(prev State, results []Result, ev Evidence, now time.Time, p RecoveryPolicy) State {
	cur := indexResults(results)
	next := State{}
	for _, f := range prev.Faults {
		f = observeFault(f, cur, ev, now)
		if cleared(f, cur, now, p.Window) {
			continue
		}
		next.Faults = append(next.Faults, f)
	}
	for _, r := range results {
		if r.Severity != SeverityFatal || slices.ContainsFunc(next.Faults, func(f Fault) bool { return f.key() == r.key() }) {
			continue
		}
		next.Faults = append(next.Faults, Fault{Result: r, Since: now, BootID: ev.BootID})
	}
	next.Faults = relatchGPUs(next.Faults, results)
	next.Held = holdWarnings(prev.Held, results, now, p.WarningHold)
	slices.SortFunc(next.Faults, func(a, b Fault) int {
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.Check, b.Check), cmp.Compare(a.UUID, b.UUID))
	})
	return next
}

// results indexed by what they are about.
type resultIndex map[faultKey]Result

func indexResults(results []Result) resultIndex {
	idx := make(resultIndex, len(results))
	for _, r := range results {
		if old, ok := idx[r.key()]; !ok || r.Severity > old.Severity {
			idx[r.key()] = r
		}
	}
	return idx
}

// nodeKey is the NVML check's key.
var nodeKey = faultKey{GPU: NodeGPU, Check: CheckNVML}

// driverGone: the NVIDIA driver or library could not be loaded this cycle, as
// during a driver reload; NVML answering errors or hanging is not that.
func (idx resultIndex) driverGone() bool {
	r := idx[nodeKey]
	return r.Severity == SeverityUnknown && r.Reason == ReasonNVMLUnavailable
}

// blind: NVML could not be used at all this cycle.
func (idx resultIndex) blind() bool { return idx[nodeKey].Severity == SeverityUnknown }

// observeFault updates one fault with this cycle: relatched by a fatal result,
// marked gone, or given evidence of recovery.
func observeFault(f Fault, cur resultIndex, ev Evidence, now time.Time) Fault {
	if r, ok := cur[f.key()]; ok && r.Severity == SeverityFatal {
		f.Result, f.BootID, f.Evidence, f.EvidenceAt = r, ev.BootID, "", time.Time{}
		return f
	}
	if cur.driverGone() || gpuGone(f, cur) {
		if f.GoneAt.IsZero() {
			f.GoneAt = now
		}
		return f
	}
	if f.Evidence != "" {
		return f
	}
	if why := evidenceFor(f, cur, ev); why != "" {
		f.Evidence, f.EvidenceAt = why, now
	}
	return f
}

// gpuGone: this cycle shows the fault's GPU missing or lost.
func gpuGone(f Fault, cur resultIndex) bool {
	if f.UUID == "" {
		return false
	}
	for _, c := range []Check{CheckGPUCount, CheckGPULost} {
		if r, ok := cur[faultKey{UUID: f.UUID, GPU: f.GPU, Check: c}]; ok && r.Severity == SeverityFatal {
			return true
		}
	}
	return false
}

// evidenceFor names the evidence that the fault's GPU recovered, or "".
func evidenceFor(f Fault, cur resultIndex, ev Evidence) string {
	switch {
	case f.BootID != "" && ev.BootID != "" && f.BootID != ev.BootID:
		return evidenceReboot
	case !ev.ResetAckAt.IsZero() && ev.ResetAckAt.After(f.Since):
		return "GPU reset acknowledged by an operator"
	case !f.GoneAt.IsZero() && visible(f, cur, ""):
		return "GPU re-attached"
	case !f.Event && passes(cur[f.key()]):
		return "check passes again"
	}
	return ""
}

// visible: the fault's GPU (or, for node-level faults, the GPU count) checks out
// now. After a reboot, a GPU NVML no longer lists while every expected GPU is
// there was replaced.
func visible(f Fault, cur resultIndex, evidence string) bool {
	if r, ok := cur[faultKey{UUID: f.UUID, GPU: f.GPU, Check: CheckGPUCount}]; ok {
		return passes(r)
	}
	return evidence == evidenceReboot && passes(cur[faultKey{GPU: NodeGPU, Check: CheckGPUCount}])
}

// evidenceReboot is the evidence a boot-ID change gives.
const evidenceReboot = "node rebooted"

// passes: r was read this cycle, applies, and is fine.
func passes(r Result) bool { return r.Check != "" && !r.NA && r.Severity <= SeverityWarning }

// cleared: the fault has had evidence of recovery for the whole window, and its
// GPU is being watched and seen now.
func cleared(f Fault, cur resultIndex, now time.Time, window time.Duration) bool {
	if f.EvidenceAt.IsZero() || cur.blind() || now.Sub(f.EvidenceAt) < window || !visible(f, cur, f.Evidence) {
		return false
	}
	r, read := cur[f.key()]
	return f.Event || !read || passes(r)
}

// relatchGPUs withdraws the evidence of every fault on a GPU that has a fatal
// result this cycle: the healthy window is for the GPU, not the check.
func relatchGPUs(faults []Fault, results []Result) []Fault {
	for _, r := range results {
		if r.Severity != SeverityFatal {
			continue
		}
		for i := range faults {
			if faults[i].UUID == r.UUID && faults[i].GPU == r.GPU {
				faults[i].Evidence, faults[i].EvidenceAt = "", time.Time{}
			}
		}
	}
	return faults
}

// holdWarnings keeps each warning until it has been absent for hold.
func holdWarnings(prev []Held, results []Result, now time.Time, hold time.Duration) []Held {
	var out []Held
	seen := map[faultKey]bool{}
	for _, r := range results {
		if r.Severity == SeverityWarning && !seen[r.key()] {
			seen[r.key()] = true
			out = append(out, Held{Result: r, LastSeen: now})
		}
	}
	for _, h := range prev {
		if !seen[h.key()] && now.Sub(h.LastSeen) < hold {
			seen[h.key()] = true
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.Check, b.Check))
	})
	return out
}
