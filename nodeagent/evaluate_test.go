package nodeagent

import (
	"fmt"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// sampleOf is a healthy H200 sample for GPU i, changed by each option.
func sampleOf(i int, opts ...func(*GPUSample)) GPUSample {
	links := make([]LinkState, fakeLinks)
	for l := range links {
		links[l] = LinkState{Link: l, Up: true}
	}
	s := GPUSample{
		Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "NVIDIA H200",
		RetiredPending: Reading[bool]{Err: ErrNotSupported},
		RetiredPages:   Reading[int]{Err: ErrNotSupported},
		NVLinks:        Reading[[]LinkState]{Value: links},
		TemperatureC:   Reading[uint32]{Value: 45},
		SlowdownC:      Reading[uint32]{Value: fakeSlowdownC},
		PowerMilliW:    Reading[uint32]{Value: fakePowerMW},
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// observationOf is a healthy node with the given samples, all known.
func observationOf(samples ...GPUSample) Observation {
	obs := Observation{Count: Reading[int]{Value: len(samples)}, GPUs: samples, Known: map[string]int{}, LinkBaseline: map[string][]int{}}
	for _, s := range samples {
		obs.Known[s.UUID] = s.Index
	}
	return obs
}

// problems keeps the results that are not OK.
func problems(results []Result) []Result {
	var out []Result
	for _, r := range results {
		if r.Severity != SeverityOK {
			out = append(out, r)
		}
	}
	return out
}

func TestEvaluateTurnsReadingsIntoResults(t *testing.T) {
	timeout := &CallError{Call: "GetTotalEccErrors", GPU: 1, Timeout: 5 * time.Second}
	cases := map[string]struct {
		obs  func() Observation
		want []Result
	}{
		"healthy GPUs have no problems": {
			obs: func() Observation { return observationOf(sampleOf(0), sampleOf(1)) },
		},
		"uncorrectable ECC errors are fatal": {
			obs: func() Observation {
				return observationOf(sampleOf(0, func(s *GPUSample) { s.ECCUncorrected.Value = 2 }))
			},
			want: []Result{{GPU: 0, UUID: "GPU-0", Check: CheckECC, Severity: SeverityFatal, Reason: ReasonECCUncorrectable,
				Action: ActionResetGPU, Message: "2 uncorrectable (double-bit) ECC errors since the last reset"}},
		},
		"a pending page retirement is fatal until a reset": {
			obs: func() Observation {
				return observationOf(sampleOf(0, func(s *GPUSample) {
					s.RetiredPending = Reading[bool]{Value: true}
					s.RetiredPages = Reading[int]{Value: 3}
				}))
			},
			want: []Result{{GPU: 0, UUID: "GPU-0", Check: CheckRetiredPages, Severity: SeverityFatal, Reason: ReasonRetiredPagesPending,
				Action: ActionResetGPU, Message: "a page retirement is pending until the GPU is reset (3 pages retired)"}},
		},
		"an NVLink seen up before and now down is fatal": {
			obs: func() Observation {
				obs := observationOf(sampleOf(2, func(s *GPUSample) { s.NVLinks.Value[5].Up = false }))
				obs.LinkBaseline["GPU-2"] = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}
				return obs
			},
			want: []Result{{GPU: 2, UUID: "GPU-2", Check: CheckNVLink, Severity: SeverityFatal, Reason: ReasonNVLinkDown,
				Action: ActionResetGPU, Message: "NVLink 5 down (17 links up)"}},
		},
		"an NVLink never seen up is not a fault without an expected count": {
			obs: func() Observation {
				return observationOf(sampleOf(2, func(s *GPUSample) { s.NVLinks.Value[5].Up = false }))
			},
		},
		"a GPU without NVLinks passes vacuously": {
			obs: func() Observation {
				return observationOf(sampleOf(0, func(s *GPUSample) { s.NVLinks.Value = nil }))
			},
		},
		"a known GPU gone is named": {
			obs: func() Observation {
				obs := observationOf(sampleOf(0), sampleOf(1))
				obs.Known["GPU-7"] = 7
				return obs
			},
			want: []Result{{GPU: 7, UUID: "GPU-7", Check: CheckGPUCount, Severity: SeverityFatal, Reason: ReasonGPUMissing,
				Action: ActionRebootNode, Message: "gone: NVML lists 2 of 3 GPUs (fallen off the bus?)"}},
		},
		"fewer GPUs than expected, none known gone, is a node fault": {
			obs: func() Observation {
				obs := observationOf(sampleOf(0))
				obs.Expected = 8
				return obs
			},
			want: []Result{{GPU: NodeGPU, Check: CheckGPUCount, Severity: SeverityFatal, Reason: ReasonGPUMissing,
				Action: ActionRebootNode, Message: "NVML lists 1 GPUs, expected 8"}},
		},
		"a call that timed out is unknown, not healthy": {
			obs: func() Observation {
				return observationOf(sampleOf(1, func(s *GPUSample) { s.ECCUncorrected.Err = timeout }))
			},
			want: []Result{{GPU: 1, UUID: "GPU-1", Check: CheckECC, Severity: SeverityUnknown, Reason: ReasonNVMLUnresponsive,
				Message: "NVML GetTotalEccErrors: no answer within 5s"}},
		},
		"a call that failed is unknown": {
			obs: func() Observation {
				return observationOf(sampleOf(1, func(s *GPUSample) {
					s.TemperatureC.Err = &CallError{Call: "GetTemperature", Ret: nvml.ERROR_UNKNOWN}
				}))
			},
			want: []Result{{GPU: 1, UUID: "GPU-1", Check: CheckTemperature, Severity: SeverityUnknown, Reason: ReasonNVMLError,
				Message: "NVML GetTemperature: ERROR_UNKNOWN"}},
		},
		"a GPU that needs a reset is fatal": {
			obs: func() Observation {
				return observationOf(sampleOf(4, func(s *GPUSample) {
					s.ResetRequired = &CallError{Call: "GetPowerUsage", Ret: nvml.ERROR_RESET_REQUIRED}
				}))
			},
			want: []Result{{GPU: 4, UUID: "GPU-4", Check: CheckGPULost, Severity: SeverityFatal, Reason: ReasonGPUResetRequired,
				Action: ActionResetGPU, Message: "NVML reports the GPU needs a reset: NVML GetPowerUsage: ERROR_RESET_REQUIRED"}},
		},
		"power-cap slowdown is the user's business": {
			obs: func() Observation {
				return observationOf(sampleOf(0, func(s *GPUSample) { s.ClockReasons.Value = nvml.ClocksEventReasonSwPowerCap }))
			},
		},
		"sw thermal slowdown is a warning": {
			obs: func() Observation {
				return observationOf(sampleOf(0, func(s *GPUSample) { s.ClockReasons.Value = nvml.ClocksEventReasonSwThermalSlowdown }))
			},
			want: []Result{{GPU: 0, UUID: "GPU-0", Check: CheckClocks, Severity: SeverityWarning, Reason: ReasonClocksSlowdown,
				Action: ActionInspect, Message: "clocks slowed: sw-thermal"}},
		},
		"XIDs are classified; ignored ones leave nothing": {
			obs: func() Observation {
				obs := observationOf(sampleOf(0))
				obs.XIDs = []XIDEvent{{GPU: 0, UUID: "GPU-0", XID: 13}, {GPU: 0, UUID: "GPU-0", XID: 92}, {GPU: 0, UUID: "GPU-0", XID: 48}}
				return obs
			},
			want: []Result{
				{GPU: 0, UUID: "GPU-0", Check: CheckXID, Severity: SeverityWarning, Reason: ReasonXIDWarning, Event: true,
					Action: ActionNone, Message: "XID 92 (high single-bit ECC error rate)"},
				{GPU: 0, UUID: "GPU-0", Check: CheckXID, Severity: SeverityFatal, Reason: ReasonXIDFatal, Event: true,
					Action: ActionResetGPU, Message: "XID 48 (double-bit ECC error)"},
			},
		},
		"a broken XID watch is unknown": {
			obs: func() Observation {
				obs := observationOf(sampleOf(0))
				obs.Watch = &CallError{Call: "EventSetCreate", Ret: nvml.ERROR_UNKNOWN}
				return obs
			},
			want: []Result{{GPU: NodeGPU, Check: CheckXIDWatch, Severity: SeverityUnknown, Reason: ReasonXIDWatchFailed,
				Message: "XID events are not watched: NVML EventSetCreate: ERROR_UNKNOWN"}},
		},
		"NVML unavailable is one unknown result": {
			obs: func() Observation {
				return Observation{NVML: NVMLStatus{Reason: ReasonNVMLUnavailable, Message: "no library"}}
			},
			want: []Result{{GPU: NodeGPU, Check: CheckNVML, Severity: SeverityUnknown, Reason: ReasonNVMLUnavailable, Message: "no library"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := problems(Evaluate(tc.obs(), DefaultXIDPolicy(nil, nil)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEvaluateReportsEveryCheck: --once prints every check, so a healthy GPU
// has a result for each, and unsupported ones say so.
func TestEvaluateReportsEveryCheck(t *testing.T) {
	results := Evaluate(observationOf(sampleOf(0)), DefaultXIDPolicy(nil, nil))
	got := map[Check]string{}
	for _, r := range results {
		if r.GPU == 0 {
			got[r.Check] = r.Message
		}
	}
	want := map[Check]string{
		CheckGPUCount:     "visible",
		CheckGPULost:      "reachable",
		CheckECC:          "no uncorrectable ECC errors since the last reset",
		CheckRowRemap:     "0 rows remapped (0 for uncorrectable errors), none pending",
		CheckRetiredPages: "not supported on this GPU or driver",
		CheckNVLink:       "18 links up",
		CheckTemperature:  "45 C, slowdown at 90 C",
		CheckClocks:       "no hardware or thermal slowdown",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
