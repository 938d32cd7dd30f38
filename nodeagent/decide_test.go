package nodeagent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// Result builders for GPU 3 (UUID GPU-3).
func ok3(c Check) Result { return Result{GPU: 3, UUID: "GPU-3", Check: c, Message: "fine"} }

func fatal3(c Check, reason string) Result {
	return Result{GPU: 3, UUID: "GPU-3", Check: c, Severity: SeverityFatal, Reason: reason, Message: "broken", Action: ActionResetGPU}
}

func xid3(xid uint64) Result {
	return Result{GPU: 3, UUID: "GPU-3", Check: CheckXID, Severity: SeverityFatal, Reason: ReasonXIDFatal, Event: true,
		Message: "XID", Action: ActionRebootNode}
}

// healthy3 is a cycle in which NVML works and GPU 3 is visible and fine.
func healthy3(extra ...Result) []Result {
	out := []Result{{GPU: NodeGPU, Check: CheckNVML}, {GPU: NodeGPU, Check: CheckGPUCount}, ok3(CheckGPUCount), ok3(CheckECC)}
	return append(out, extra...)
}

// healthy3But is healthy3 with GPU 3's result for r's check replaced by r.
func healthy3But(r Result) []Result {
	var out []Result
	for _, h := range healthy3() {
		if h.GPU != 3 || h.Check != r.Check {
			out = append(out, h)
		}
	}
	return append(out, r)
}

// step is one cycle: its time after t0, results, boot and acknowledgement.
type step struct {
	at      time.Duration
	results []Result
	boot    string
	ack     time.Time
}

// faultSummary keeps what the decision tests compare.
type faultSummary struct {
	Check    Check
	Evidence string
	Since    time.Duration
}

func TestDecideLatchesFaultsUntilEvidenceAndAHealthyWindow(t *testing.T) {
	window := 5 * time.Minute
	cases := map[string]struct {
		steps []step
		want  []faultSummary
	}{
		"an XID latches and stays latched on quiet alone": {
			steps: []step{
				{at: 0, results: healthy3(xid3(79))},
				{at: time.Hour, results: healthy3()},
			},
			want: []faultSummary{{Check: CheckXID}},
		},
		"a reboot gives an XID evidence; it clears after the window": {
			steps: []step{
				{at: 0, results: healthy3(xid3(79))},
				{at: time.Minute, results: healthy3(), boot: "boot-2"},
				{at: time.Minute + window, results: healthy3(), boot: "boot-2"},
			},
		},
		"within the window the fault stays, saying it is recovering": {
			steps: []step{
				{at: 0, results: healthy3(xid3(79))},
				{at: time.Minute, results: healthy3(), boot: "boot-2"},
				{at: time.Minute + window - time.Second, results: healthy3(), boot: "boot-2"},
			},
			want: []faultSummary{{Check: CheckXID, Evidence: evidenceReboot}},
		},
		"a fatal result on the GPU during the window restarts it": {
			steps: []step{
				{at: 0, results: healthy3(xid3(79))},
				{at: time.Minute, results: healthy3(), boot: "boot-2"},
				{at: 2 * time.Minute, results: healthy3But(fatal3(CheckECC, ReasonECCUncorrectable)), boot: "boot-2"},
				{at: time.Minute + window, results: healthy3(), boot: "boot-2"},
			},
			want: []faultSummary{{Check: CheckECC, Evidence: "check passes again", Since: 2 * time.Minute}, {Check: CheckXID, Evidence: evidenceReboot}},
		},
		"ECC errors clear once the counter reads zero (a reset) for the window": {
			steps: []step{
				{at: 0, results: healthy3But(fatal3(CheckECC, ReasonECCUncorrectable))},
				{at: time.Minute, results: healthy3()},
				{at: time.Minute + window, results: healthy3()},
			},
		},
		"a check that cannot be read is no evidence": {
			steps: []step{
				{at: 0, results: healthy3But(fatal3(CheckECC, ReasonECCUncorrectable))},
				{at: time.Minute, results: healthy3But(Result{GPU: 3, UUID: "GPU-3", Check: CheckECC, Severity: SeverityUnknown})},
				{at: time.Hour, results: healthy3But(Result{GPU: 3, UUID: "GPU-3", Check: CheckECC, Severity: SeverityUnknown})},
			},
			want: []faultSummary{{Check: CheckECC}},
		},
		"a GPU that leaves the bus and comes back gives its XID evidence": {
			steps: []step{
				{at: 0, results: healthy3(xid3(79))},
				{at: time.Second, results: healthy3But(fatal3(CheckGPUCount, ReasonGPUMissing))},
				{at: time.Minute, results: healthy3()},
				{at: time.Minute + window - time.Second, results: healthy3()},
			},
			want: []faultSummary{
				{Check: CheckGPUCount, Evidence: "check passes again", Since: time.Second},
				{Check: CheckXID, Evidence: "GPU re-attached"},
			},
		},
		"...and both clear after the window": {
			steps: []step{
				{at: 0, results: healthy3(xid3(79))},
				{at: time.Second, results: healthy3But(fatal3(CheckGPUCount, ReasonGPUMissing))},
				{at: time.Minute, results: healthy3()},
				{at: time.Minute + window, results: healthy3()},
			},
		},
		"an operator's reset acknowledgement after the fault is evidence": {
			steps: []step{
				{at: 0, results: healthy3(xid3(48))},
				{at: time.Minute, results: healthy3(), ack: t0.Add(30 * time.Second)},
			},
			want: []faultSummary{{Check: CheckXID, Evidence: "GPU reset acknowledged by an operator"}},
		},
		"an acknowledgement older than the fault is not": {
			steps: []step{
				{at: 0, results: healthy3(xid3(48))},
				{at: time.Hour, results: healthy3(), ack: t0.Add(-time.Minute)},
			},
			want: []faultSummary{{Check: CheckXID}},
		},
		"nothing clears while NVML cannot be used": {
			steps: []step{
				{at: 0, results: healthy3(xid3(79))},
				{at: time.Minute, results: healthy3(), boot: "boot-2"},
				{at: time.Hour, boot: "boot-2", results: []Result{{GPU: NodeGPU, Check: CheckNVML, Severity: SeverityUnknown, Reason: ReasonNVMLUnavailable}}},
			},
			want: []faultSummary{{Check: CheckXID, Evidence: evidenceReboot}},
		},
		"a GPU replaced across a reboot clears its faults": {
			steps: []step{
				{at: 0, results: healthy3(fatal3(CheckRowRemap, ReasonRowRemapFailed))},
				{at: time.Hour, boot: "boot-2", results: []Result{{GPU: NodeGPU, Check: CheckNVML}, {GPU: NodeGPU, Check: CheckGPUCount},
					{GPU: 3, UUID: "GPU-new", Check: CheckGPUCount}}},
				{at: time.Hour + window, boot: "boot-2", results: []Result{{GPU: NodeGPU, Check: CheckNVML}, {GPU: NodeGPU, Check: CheckGPUCount},
					{GPU: 3, UUID: "GPU-new", Check: CheckGPUCount}}},
			},
		},
		"a failed row remap survives a reboot": {
			steps: []step{
				{at: 0, results: healthy3(fatal3(CheckRowRemap, ReasonRowRemapFailed))},
				{at: time.Hour, boot: "boot-2", results: healthy3(fatal3(CheckRowRemap, ReasonRowRemapFailed))},
				{at: 2 * time.Hour, boot: "boot-2", results: healthy3(fatal3(CheckRowRemap, ReasonRowRemapFailed))},
			},
			want: []faultSummary{{Check: CheckRowRemap}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := State{}
			for _, s := range tc.steps {
				boot := s.boot
				if boot == "" {
					boot = "boot-1"
				}
				st = Decide(st, s.results, Evidence{BootID: boot, ResetAckAt: s.ack}, t0.Add(s.at), RecoveryPolicy{Window: window})
			}
			var got []faultSummary
			for _, f := range st.Faults {
				got = append(got, faultSummary{Check: f.Check, Evidence: f.Evidence, Since: f.Since.Sub(t0)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("faults (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideHoldsWarningsForTheHoldTime(t *testing.T) {
	warn := Result{GPU: 3, UUID: "GPU-3", Check: CheckTemperature, Severity: SeverityWarning, Reason: ReasonTemperatureHigh}
	p := RecoveryPolicy{Window: time.Minute, WarningHold: time.Minute}
	cases := map[string]struct {
		after time.Duration
		held  int
	}{
		"held 30s after it was last seen": {after: 30 * time.Second, held: 1},
		"dropped a minute after":          {after: time.Minute, held: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := Decide(State{}, healthy3(warn), Evidence{}, t0, p)
			st = Decide(st, healthy3(), Evidence{}, t0.Add(tc.after), p)
			if len(st.Held) != tc.held {
				t.Errorf("held %d warnings, want %d", len(st.Held), tc.held)
			}
		})
	}
}

func TestVerdictFor(t *testing.T) {
	fault := func(gpu int, c Check, reason, evidence string) Fault {
		return Fault{Result: Result{GPU: gpu, UUID: "GPU-" + string(rune('0'+gpu)), Check: c, Severity: SeverityFatal,
			Reason: reason, Message: "broken", Action: ActionResetGPU}, Evidence: evidence}
	}
	cases := map[string]struct {
		state   State
		results []Result
		want    Verdict
	}{
		"healthy GPUs are counted": {
			results: []Result{{GPU: NodeGPU, Check: CheckNVML}, ok3(CheckECC), {GPU: 4, Check: CheckECC}},
			want:    Verdict{Status: corev1.ConditionTrue, Reason: ReasonHealthy, Message: "2 GPUs healthy"},
		},
		"a fault is False and tainted, naming GPU, check and action": {
			state: State{Faults: []Fault{fault(3, CheckECC, ReasonECCUncorrectable, "")}},
			want: Verdict{Status: corev1.ConditionFalse, Reason: ReasonECCUncorrectable, Taint: true,
				Message: "GPU 3 (GPU-3): ecc: broken; action RESET_GPU"},
		},
		"a recovering fault says so": {
			state: State{Faults: []Fault{fault(3, CheckXID, ReasonXIDFatal, evidenceReboot)}},
			want: Verdict{Status: corev1.ConditionFalse, Reason: ReasonXIDFatal, Taint: true,
				Message: "GPU 3 (GPU-3): xid: broken; action RESET_GPU; recovering: node rebooted"},
		},
		"a fault outranks an unknown": {
			state:   State{Faults: []Fault{fault(1, CheckNVLink, ReasonNVLinkDown, "")}},
			results: []Result{{GPU: 2, Check: CheckECC, Severity: SeverityUnknown, Reason: ReasonNVMLUnresponsive}},
			want: Verdict{Status: corev1.ConditionFalse, Reason: ReasonNVLinkDown, Taint: true,
				Message: "GPU 1 (GPU-1): nvlink: broken; action RESET_GPU"},
		},
		"many faults are summarised": {
			state: State{Faults: []Fault{fault(0, CheckECC, ReasonECCUncorrectable, ""), fault(1, CheckECC, ReasonECCUncorrectable, ""),
				fault(2, CheckECC, ReasonECCUncorrectable, ""), fault(3, CheckECC, ReasonECCUncorrectable, ""), fault(4, CheckECC, ReasonECCUncorrectable, "")}},
			want: Verdict{Status: corev1.ConditionFalse, Reason: ReasonECCUncorrectable, Taint: true,
				Message: "GPU 0 (GPU-0): ecc: broken; action RESET_GPU; GPU 1 (GPU-1): ecc: broken; action RESET_GPU; " +
					"GPU 2 (GPU-2): ecc: broken; action RESET_GPU; GPU 3 (GPU-3): ecc: broken; action RESET_GPU; and 1 more"},
		},
		"an unreadable check is Unknown, never healthy, never tainted": {
			results: []Result{{GPU: NodeGPU, Check: CheckNVML}, {GPU: 2, UUID: "GPU-2", Check: CheckECC, Severity: SeverityUnknown,
				Reason: ReasonNVMLUnresponsive, Message: "NVML GetTotalEccErrors: no answer within 5s"}},
			want: Verdict{Status: corev1.ConditionUnknown, Reason: ReasonNVMLUnresponsive,
				Message: "GPU 2 (GPU-2): ecc: NVML GetTotalEccErrors: no answer within 5s; the GPUs are not fully monitored"},
		},
		"held warnings make it degraded, still schedulable": {
			state: State{Held: []Held{{Result: Result{GPU: 3, UUID: "GPU-3", Check: CheckTemperature, Severity: SeverityWarning,
				Reason: ReasonTemperatureHigh, Message: "91 C"}}}},
			results: healthy3(),
			want:    Verdict{Status: corev1.ConditionTrue, Reason: ReasonDegraded, Message: "GPU 3 (GPU-3): temperature: 91 C"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, VerdictFor(tc.state, tc.results)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
