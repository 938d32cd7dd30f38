package nodeagent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestOnceFindsEachInjectedFaultOnTheMockH200Server runs one cycle against the
// simulated 8x H200 with one fault injected, and checks the verdict names the
// GPU (index and UUID) and the failing check.
func TestOnceFindsEachInjectedFaultOnTheMockH200Server(t *testing.T) {
	gpu := func(f *fakeNVML, i int) string { return fmt.Sprintf("GPU %d (%s)", i, f.uuid(i)) }
	cases := map[string]struct {
		inject func(f *fakeNVML)
		config func(c *Config)
		want   func(f *fakeNVML) Verdict
	}{
		"eight healthy GPUs are reported healthy": {
			want: func(*fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionTrue, Reason: ReasonHealthy, Message: "8 GPUs healthy"}
			},
		},
		"an XID 79 event taints, naming the GPU and the XID": {
			inject: func(f *fakeNVML) { f.xid(3, 79) },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonXIDFatal, Taint: true,
					Message: gpu(f, 3) + ": xid: XID 79 (GPU has fallen off the bus); action REBOOT_NODE"}
			},
		},
		"an application XID (13) is ignored": {
			inject: func(f *fakeNVML) { f.xid(2, 13) },
			want: func(*fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionTrue, Reason: ReasonHealthy, Message: "8 GPUs healthy"}
			},
		},
		"an XID made fatal by configuration taints": {
			inject: func(f *fakeNVML) { f.xid(2, 94) },
			config: func(c *Config) { c.XIDs = DefaultXIDPolicy([]uint64{94}, nil) },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonXIDFatal, Taint: true,
					Message: gpu(f, 2) + ": xid: XID 94 (contained ECC error); action RESET_GPU"}
			},
		},
		"uncorrectable ECC errors taint": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.ecc[2] = 3 }) },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonECCUncorrectable, Taint: true,
					Message: gpu(f, 2) + ": ecc: 3 uncorrectable (double-bit) ECC errors since the last reset; action RESET_GPU"}
			},
		},
		"a pending row remap taints until a reset": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.remapPending[5] = true }) },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonRowRemapPending, Taint: true,
					Message: gpu(f, 5) + ": row-remap: a row remap is pending until the GPU is reset (0 rows remapped for uncorrectable errors); action RESET_GPU"}
			},
		},
		"a failed row remap asks for the hardware to be inspected": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.remapFailed[0] = true }) },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonRowRemapFailed, Taint: true,
					Message: gpu(f, 0) + ": row-remap: a row remap failed: the memory cannot be repaired in place; action INSPECT_HARDWARE"}
			},
		},
		"a GPU gone from the bus is counted against the expected count": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.gone[6] = true }) },
			config: func(c *Config) { c.ExpectedGPUs = 8 },
			want: func(*fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonGPUMissing, Taint: true,
					Message: "node: gpu-count: NVML lists 7 GPUs, expected 8; action REBOOT_NODE"}
			},
		},
		"a GPU NVML calls lost taints": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.lost[1] = true }) },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonGPULost, Taint: true,
					Message: gpu(f, 1) + ": gpu-lost: NVML reports the GPU lost: NVML GetTotalEccErrors: ERROR_GPU_IS_LOST; action REBOOT_NODE"}
			},
		},
		"an NVLink down against the expected count taints": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.linkDown[[2]int{4, 7}] = true }) },
			config: func(c *Config) { c.ExpectedNVLinks = fakeLinks },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionFalse, Reason: ReasonNVLinkDown, Taint: true,
					Message: gpu(f, 4) + ": nvlink: 17 of 18 expected NVLinks up; action RESET_GPU"}
			},
		},
		"a GPU at its slowdown temperature is degraded, not tainted": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.temp[4] = 93 }) },
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionTrue, Reason: ReasonDegraded,
					Message: gpu(f, 4) + ": temperature: 93 C, at or above the slowdown threshold of 90 C"}
			},
		},
		"hardware clock slowdown is degraded, not tainted": {
			inject: func(f *fakeNVML) {
				f.set(func(f *fakeNVML) {
					f.clocks[7] = nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksEventReasonSwPowerCap
				})
			},
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionTrue, Reason: ReasonDegraded,
					Message: gpu(f, 7) + ": clocks: clocks slowed: hw-slowdown, hw-thermal"}
			},
		},
		"an NVML call that hangs is a failed check, not a healthy GPU": {
			inject: func(f *fakeNVML) { f.hang("GetTotalEccErrors") },
			config: withHangTimeout,
			want: func(f *fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionUnknown, Reason: ReasonNVMLUnresponsive}
			},
		},
		"a missing NVML library leaves the node unmonitored": {
			inject: func(f *fakeNVML) { f.set(func(f *fakeNVML) { f.initRet = nvml.ERROR_LIBRARY_NOT_FOUND }) },
			want: func(*fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionUnknown, Reason: ReasonNVMLUnavailable,
					Message: "node: nvml: NVML library (libnvidia-ml.so.1) not found: the NVIDIA driver is not installed, or not mounted into the agent (nvidia runtime class); the GPUs are not monitored"}
			},
		},
		"a hung NVML init leaves the node unmonitored": {
			inject: func(f *fakeNVML) { f.hang("Init") },
			config: withHangTimeout,
			want: func(*fakeNVML) Verdict {
				return Verdict{Status: corev1.ConditionUnknown, Reason: ReasonNVMLUnresponsive,
					Message: "node: nvml: NVML Init: no answer within 200ms; the GPUs are not monitored"}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFakeNVML(t)
			if tc.inject != nil {
				tc.inject(f)
			}
			a := newTestAgent(t, f, nil, nil, tc.config)
			report, err := a.Once(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want, got := tc.want(f), report.Verdict
			if want.Message == "" { // messages about hung calls name whichever call hung first
				got.Message = ""
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOnceWithHungCallNamesTheCall: the Unknown message says which call hung and
// on which GPU, so that nobody mistakes the agent's trouble for the GPU's.
func TestOnceWithHungCallNamesTheCall(t *testing.T) {
	f := newFakeNVML(t)
	f.hang("GetTotalEccErrors")
	report, err := newTestAgent(t, f, nil, nil, withHangTimeout).Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("GPU 0 (%s): ecc: NVML GetTotalEccErrors: no answer within 200ms", f.uuid(0))
	if !strings.HasPrefix(report.Verdict.Message, want) {
		t.Errorf("message %q, want it to start %q", report.Verdict.Message, want)
	}
}

// TestOnceWithTheRealLibraryMissingReportsUnmonitored uses go-nvml's real
// binding pointed at a library that is not there (as on a machine without a
// driver): no crash, status Unknown.
func TestOnceWithTheRealLibraryMissingReportsUnmonitored(t *testing.T) {
	lib := nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1"))
	report, err := newTestAgent(t, lib, nil, nil, nil).Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := Verdict{Status: report.Verdict.Status, Reason: report.Verdict.Reason, Taint: report.Verdict.Taint}
	if diff := cmp.Diff(Verdict{Status: corev1.ConditionUnknown, Reason: ReasonNVMLUnavailable}, got); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
}
