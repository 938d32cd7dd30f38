package nodeagent

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Per-check reasons (condition and Event reasons).
const (
	ReasonGPUMissing          = "GPUMissing"
	ReasonGPULost             = "GPULost"
	ReasonGPUResetRequired    = "GPUResetRequired"
	ReasonXIDFatal            = "XIDFatal"
	ReasonXIDWarning          = "XIDWarning"
	ReasonXIDWatchFailed      = "XIDWatchFailed"
	ReasonECCUncorrectable    = "ECCUncorrectable"
	ReasonRowRemapPending     = "RowRemapPending"
	ReasonRowRemapFailed      = "RowRemapFailed"
	ReasonRetiredPagesPending = "RetiredPagesPending"
	ReasonNVLinkDown          = "NVLinkDown"
	ReasonTemperatureHigh     = "TemperatureHigh"
	ReasonClocksSlowdown      = "ClocksSlowdown"
)

// slowdownReasons are the clock-event bits that mean the hardware or the thermal
// limit, not the user or the power cap, slowed the GPU.
var slowdownReasons = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksThrottleReasonHwSlowdown, "hw-slowdown"},
	{nvml.ClocksEventReasonSwThermalSlowdown, "sw-thermal"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw-thermal"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw-power-brake"},
}

// Evaluate turns one cycle's observation into a result per GPU and check, plus
// node-level results (GPU == NodeGPU). It is a pure function.
func Evaluate(obs Observation, policy XIDPolicy) []Result {
	if obs.NVML.Reason != "" {
		return []Result{{GPU: NodeGPU, Check: CheckNVML, Severity: SeverityUnknown,
			Reason: obs.NVML.Reason, Message: obs.NVML.Message}}
	}
	out := []Result{{GPU: NodeGPU, Check: CheckNVML, Message: "NVML answers"}}
	out = append(out, evaluateCount(obs)...)
	for _, s := range obs.GPUs {
		out = append(out, evaluateGPU(s, obs.LinkBaseline[s.UUID], obs.ExpectedLinks)...)
	}
	out = append(out, evaluateXIDs(obs.XIDs, policy)...)
	out = append(out, evaluateWatch(obs.Watch))
	return out
}

// evaluateCount compares the GPUs NVML shows with those expected, naming each
// known GPU that is gone.
func evaluateCount(obs Observation) []Result {
	if obs.Count.Err != nil {
		return []Result{readErr(NodeGPU, "", CheckGPUCount, obs.Count.Err)}
	}
	present := make(map[string]bool, len(obs.GPUs))
	var out []Result
	for _, s := range obs.GPUs {
		present[s.UUID] = true
		out = append(out, Result{GPU: s.Index, UUID: s.UUID, Check: CheckGPUCount, Message: "visible"})
	}
	expected := max(obs.Expected, len(obs.Known))
	var missing []string
	for uuid := range obs.Known {
		if !present[uuid] {
			missing = append(missing, uuid)
		}
	}
	slices.SortFunc(missing, func(a, b string) int { return obs.Known[a] - obs.Known[b] })
	for _, uuid := range missing {
		out = append(out, Result{GPU: obs.Known[uuid], UUID: uuid, Check: CheckGPUCount,
			Severity: SeverityFatal, Reason: ReasonGPUMissing, Action: ActionRebootNode,
			Message: fmt.Sprintf("gone: NVML lists %d of %d GPUs (fallen off the bus?)", obs.Count.Value, expected)})
	}
	if unnamed := expected - obs.Count.Value - len(missing); unnamed > 0 {
		out = append(out, Result{GPU: NodeGPU, Check: CheckGPUCount, Severity: SeverityFatal,
			Reason: ReasonGPUMissing, Action: ActionRebootNode,
			Message: fmt.Sprintf("NVML lists %d GPUs, expected %d", obs.Count.Value, expected)})
	} else {
		out = append(out, Result{GPU: NodeGPU, Check: CheckGPUCount,
			Message: fmt.Sprintf("%d of %d expected GPUs visible", obs.Count.Value, expected)})
	}
	return out
}

// evaluateGPU checks one GPU's sample.
func evaluateGPU(s GPUSample, baseline []int, expectedLinks int) []Result {
	return []Result{
		lostResult(s),
		eccResult(s),
		rowRemapResult(s),
		retiredResult(s),
		nvlinkResult(s, baseline, expectedLinks),
		temperatureResult(s),
		clocksResult(s),
	}
}

func lostResult(s GPUSample) Result {
	r := Result{GPU: s.Index, UUID: s.UUID, Check: CheckGPULost, Message: "reachable"}
	switch {
	case s.Lost != nil:
		r.Severity, r.Reason, r.Action = SeverityFatal, ReasonGPULost, ActionRebootNode
		r.Message = "NVML reports the GPU lost: " + s.Lost.Error()
	case s.ResetRequired != nil:
		r.Severity, r.Reason, r.Action = SeverityFatal, ReasonGPUResetRequired, ActionResetGPU
		r.Message = "NVML reports the GPU needs a reset: " + s.ResetRequired.Error()
	}
	return r
}

func eccResult(s GPUSample) Result {
	if r, ok := unreadable(s, CheckECC, s.ECCUncorrected.Err); ok {
		return r
	}
	r := Result{GPU: s.Index, UUID: s.UUID, Check: CheckECC, Message: "no uncorrectable ECC errors since the last reset"}
	if n := s.ECCUncorrected.Value; n > 0 {
		r.Severity, r.Reason, r.Action = SeverityFatal, ReasonECCUncorrectable, ActionResetGPU
		r.Message = fmt.Sprintf("%d uncorrectable (double-bit) ECC errors since the last reset", n)
	}
	return r
}

func rowRemapResult(s GPUSample) Result {
	if r, ok := unreadable(s, CheckRowRemap, s.RowRemap.Err); ok {
		return r
	}
	v := s.RowRemap.Value
	r := Result{GPU: s.Index, UUID: s.UUID, Check: CheckRowRemap,
		Message: fmt.Sprintf("%d rows remapped (%d for uncorrectable errors), none pending", v.Correctable+v.Uncorrectable, v.Uncorrectable)}
	switch {
	case v.Failed:
		r.Severity, r.Reason, r.Action = SeverityFatal, ReasonRowRemapFailed, ActionInspect
		r.Message = "a row remap failed: the memory cannot be repaired in place"
	case v.Pending:
		r.Severity, r.Reason, r.Action = SeverityFatal, ReasonRowRemapPending, ActionResetGPU
		r.Message = fmt.Sprintf("a row remap is pending until the GPU is reset (%d rows remapped for uncorrectable errors)", v.Uncorrectable)
	}
	return r
}

func retiredResult(s GPUSample) Result {
	if r, ok := unreadable(s, CheckRetiredPages, s.RetiredPending.Err); ok {
		return r
	}
	pages := "retired pages unknown"
	if s.RetiredPages.Err == nil {
		pages = fmt.Sprintf("%d pages retired", s.RetiredPages.Value)
	}
	r := Result{GPU: s.Index, UUID: s.UUID, Check: CheckRetiredPages, Message: pages + ", none pending"}
	if s.RetiredPending.Value {
		r.Severity, r.Reason, r.Action = SeverityFatal, ReasonRetiredPagesPending, ActionResetGPU
		r.Message = "a page retirement is pending until the GPU is reset (" + pages + ")"
	}
	return r
}

func nvlinkResult(s GPUSample, baseline []int, expected int) Result {
	if r, ok := unreadable(s, CheckNVLink, s.NVLinks.Err); ok {
		return r
	}
	up := map[int]bool{}
	for _, l := range s.NVLinks.Value {
		if l.Up {
			up[l.Link] = true
		}
	}
	r := Result{GPU: s.Index, UUID: s.UUID, Check: CheckNVLink, Message: fmt.Sprintf("%d links up", len(up))}
	if len(s.NVLinks.Value) == 0 && expected == 0 {
		r.NA, r.Message = true, "no NVLinks"
		return r
	}
	var down []string
	for _, l := range baseline {
		if !up[l] {
			down = append(down, fmt.Sprint(l))
		}
	}
	switch {
	case len(down) > 0:
		r.Message = fmt.Sprintf("NVLink %s down (%d links up)", strings.Join(down, ", "), len(up))
	case expected > 0 && len(up) < expected:
		r.Message = fmt.Sprintf("%d of %d expected NVLinks up", len(up), expected)
	default:
		return r
	}
	r.Severity, r.Reason, r.Action = SeverityFatal, ReasonNVLinkDown, ActionResetGPU
	return r
}

func temperatureResult(s GPUSample) Result {
	if r, ok := unreadable(s, CheckTemperature, s.TemperatureC.Err); ok {
		return r
	}
	t := s.TemperatureC.Value
	r := Result{GPU: s.Index, UUID: s.UUID, Check: CheckTemperature, Message: fmt.Sprintf("%d C", t)}
	if s.SlowdownC.Err != nil || s.SlowdownC.Value == 0 {
		return r
	}
	limit := s.SlowdownC.Value
	r.Message = fmt.Sprintf("%d C, slowdown at %d C", t, limit)
	if t >= limit {
		r.Severity, r.Reason, r.Action = SeverityWarning, ReasonTemperatureHigh, ActionInspect
		r.Message = fmt.Sprintf("%d C, at or above the slowdown threshold of %d C", t, limit)
	}
	return r
}

func clocksResult(s GPUSample) Result {
	if r, ok := unreadable(s, CheckClocks, s.ClockReasons.Err); ok {
		return r
	}
	var slowed []string
	for _, sr := range slowdownReasons {
		if s.ClockReasons.Value&sr.bit != 0 {
			slowed = append(slowed, sr.name)
		}
	}
	r := Result{GPU: s.Index, UUID: s.UUID, Check: CheckClocks, Message: "no hardware or thermal slowdown"}
	if len(slowed) > 0 {
		r.Severity, r.Reason, r.Action = SeverityWarning, ReasonClocksSlowdown, ActionInspect
		r.Message = "clocks slowed: " + strings.Join(slowed, ", ")
	}
	return r
}

// unreadable is the result for a reading that failed (ok true), or ok false
// when the reading is good.
func unreadable(s GPUSample, c Check, err error) (Result, bool) {
	switch {
	case err == nil:
		return Result{}, false
	case errors.Is(err, ErrNotSupported):
		return Result{GPU: s.Index, UUID: s.UUID, Check: c, NA: true, Message: "not supported on this GPU or driver"}, true
	}
	return readErr(s.Index, s.UUID, c, err), true
}

// readErr is the Unknown result for a check that could not be read.
func readErr(gpu int, uuid string, c Check, err error) Result {
	reason := ReasonNVMLError
	if unresponsive(err) {
		reason = ReasonNVMLUnresponsive
	}
	return Result{GPU: gpu, UUID: uuid, Check: c, Severity: SeverityUnknown, Reason: reason, Message: err.Error()}
}

// evaluateXIDs classifies the XIDs seen; ignored ones leave no result.
func evaluateXIDs(events []XIDEvent, policy XIDPolicy) []Result {
	var out []Result
	for _, e := range events {
		rule := policy.Classify(e.XID)
		r := Result{GPU: e.GPU, UUID: e.UUID, Check: CheckXID, Event: true, Action: rule.Action,
			Message: fmt.Sprintf("XID %d (%s)", e.XID, rule.Description)}
		switch rule.Class {
		case XIDFatal:
			r.Severity, r.Reason = SeverityFatal, ReasonXIDFatal
		case XIDWarning:
			r.Severity, r.Reason = SeverityWarning, ReasonXIDWarning
		default:
			continue
		}
		out = append(out, r)
	}
	return out
}

func evaluateWatch(err error) Result {
	if err == nil {
		return Result{GPU: NodeGPU, Check: CheckXIDWatch, Message: "XID events watched"}
	}
	r := readErr(NodeGPU, "", CheckXIDWatch, err)
	if !unresponsive(err) {
		r.Reason = ReasonXIDWatchFailed
	}
	r.Message = "XID events are not watched: " + err.Error()
	return r
}
