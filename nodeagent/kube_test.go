package nodeagent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// The agent must publish a fault within this long of seeing it.
const publishBudget = time.Second

// TestXIDTaintsTheNodeWithinASecondAndARebootClearsIt: the whole life of a
// fault on the real API server.
func TestXIDTaintsTheNodeWithinASecondAndARebootClearsIt(t *testing.T) {
	c := apiServer(t)
	f := newFakeNVML(t)
	boot := newBootIDs("boot-1")
	gpuNode(t, c, "xid-node")
	a := newTestAgent(t, f, c, boot.get, kubeConfig("xid-node"))
	run(t, a)
	waitNode(t, c, "xid-node", 10*time.Second, "healthy", isHealthy)

	f.xid(3, 79)
	took := waitNode(t, c, "xid-node", 5*time.Second, "tainted", isUnhealthy)
	if took > publishBudget {
		t.Errorf("XID to taint took %s, want under %s", took, publishBudget)
	}
	got, node := viewNode(t, c, "xid-node")
	want := nodeView{Status: corev1.ConditionFalse, Reason: ReasonXIDFatal, Tainted: true,
		Message: fmt.Sprintf("GPU 3 (%s): xid: XID 79 (GPU has fallen off the bus); action REBOOT_NODE", f.uuid(3))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node after XID 79 (-want +got):\n%s", diff)
	}
	if !hasTaintValue(node, "nvidia.com/gpu") {
		t.Errorf("the node's other taints were lost: %v", node.Spec.Taints)
	}

	time.Sleep(3 * a.cfg.Recovery.Window)
	if v, _ := viewNode(t, c, "xid-node"); !v.Tainted {
		t.Fatalf("the taint cleared without evidence of recovery: %+v", v)
	}

	boot.set("boot-2")
	took = waitNode(t, c, "xid-node", 5*time.Second, "healthy after the reboot", isHealthy)
	if took < a.cfg.Recovery.Window {
		t.Errorf("cleared %s after the reboot, before the %s healthy window", took, a.cfg.Recovery.Window)
	}
	// Healthy at start and after recovery; the XID itself and the condition turning False.
	waitEvents(t, c, "xid-node", map[string][]string{ReasonHealthy: {"Normal", "Normal"}, ReasonXIDFatal: {"Warning", "Warning"}})
}

func hasTaintValue(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// TestEachFaultTaintsWithinASecondAndClearsOnceItsSignalClears: state faults
// (counters, flags, a GPU gone, a link down) are their own evidence of a reset
// when they clear; the taint goes after the healthy window.
func TestEachFaultTaintsWithinASecondAndClearsOnceItsSignalClears(t *testing.T) {
	c := apiServer(t)
	cases := map[string]struct {
		reason        string
		gpu           int
		break_, mend  func(f *fakeNVML)
		wantInMessage string
	}{
		"ECC errors until the GPU is reset": {
			reason: ReasonECCUncorrectable, gpu: 2,
			break_: func(f *fakeNVML) { f.ecc[2] = 1 }, mend: func(f *fakeNVML) { f.ecc[2] = 0 },
			wantInMessage: "ecc: 1 uncorrectable (double-bit) ECC errors since the last reset",
		},
		"a pending row remap until the GPU is reset": {
			reason: ReasonRowRemapPending, gpu: 5,
			break_: func(f *fakeNVML) { f.remapPending[5] = true }, mend: func(f *fakeNVML) { f.remapPending[5] = false },
			wantInMessage: "row-remap: a row remap is pending until the GPU is reset",
		},
		"a GPU gone from the bus until it is back": {
			reason: ReasonGPUMissing, gpu: 6,
			break_: func(f *fakeNVML) { f.gone[6] = true }, mend: func(f *fakeNVML) { f.gone[6] = false },
			wantInMessage: "gpu-count: gone: NVML lists 7 of 8 GPUs (fallen off the bus?)",
		},
		"an NVLink down until it is up": {
			reason: ReasonNVLinkDown, gpu: 1,
			break_: func(f *fakeNVML) { f.linkDown[[2]int{1, 9}] = true }, mend: func(f *fakeNVML) { f.linkDown[[2]int{1, 9}] = false },
			wantInMessage: "nvlink: NVLink 9 down (17 links up)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			node := "fault-" + strings.ToLower(tc.reason)
			f := newFakeNVML(t)
			gpuNode(t, c, node)
			a := newTestAgent(t, f, c, nil, kubeConfig(node))
			run(t, a)
			waitNode(t, c, node, 10*time.Second, "healthy", isHealthy)

			f.set(tc.break_)
			if took := waitNode(t, c, node, 5*time.Second, "tainted", isUnhealthy); took > publishBudget {
				t.Errorf("fault to taint took %s, want under %s", took, publishBudget)
			}
			got, _ := viewNode(t, c, node)
			wantPrefix := fmt.Sprintf("GPU %d (%s): %s", tc.gpu, f.uuid(tc.gpu), tc.wantInMessage)
			if got.Reason != tc.reason || !strings.HasPrefix(got.Message, wantPrefix) {
				t.Errorf("condition %s %q, want %s %q...", got.Reason, got.Message, tc.reason, wantPrefix)
			}

			f.set(tc.mend)
			took := waitNode(t, c, node, 5*time.Second, "healthy once mended", isHealthy)
			if took < a.cfg.Recovery.Window {
				t.Errorf("cleared %s after the fault went, before the %s healthy window", took, a.cfg.Recovery.Window)
			}
		})
	}
}

// TestCircuitBreakerWithholdsTheTaintUntilFewerNodesAreTainted: with half the
// GPU nodes tainted in the window, a fifth broken node of eight... here, the
// third of four, reports but is not tainted, until another node recovers.
func TestCircuitBreakerWithholdsTheTaintUntilFewerNodesAreTainted(t *testing.T) {
	c := apiServer(t)
	group := withLabel("test.taugrid.dev/breaker", "group-1")
	gpuNode(t, c, "breaker-0", group)
	gpuNode(t, c, "breaker-1", group, withOurTaint(time.Now()))
	gpuNode(t, c, "breaker-2", group, withOurTaint(time.Now()))
	gpuNode(t, c, "breaker-3", group)
	f := newFakeNVML(t)
	a := newTestAgent(t, f, c, nil, func(cfg *Config) {
		cfg.NodeName = "breaker-0"
		cfg.GPUNodeSelector = "test.taugrid.dev/breaker=group-1"
	})
	f.xid(0, 48)
	run(t, a)

	waitNode(t, c, "breaker-0", 5*time.Second, "reported unhealthy", func(v nodeView) bool {
		return v.Status == corev1.ConditionFalse
	})
	time.Sleep(10 * a.cfg.PollInterval)
	got, _ := viewNode(t, c, "breaker-0")
	if got.Tainted || !strings.HasSuffix(got.Message, "taint withheld: circuit breaker open: 2 of 4 GPU nodes tainted in the last 5m0s, limit 2") {
		t.Errorf("with 2 of 4 GPU nodes tainted: %+v, want the condition False, saying the taint is withheld, and no taint", got)
	}
	if evs := events(t, c, "breaker-0"); len(evs["CircuitBreakerOpen"]) != 1 {
		t.Errorf("Events %v, want one CircuitBreakerOpen", evs)
	}

	// breaker-2 recovers: its agent removes the taint.
	n, err := c.CoreV1().Nodes().Get(t.Context(), "breaker-2", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = nil
	if _, err := c.CoreV1().Nodes().Update(t.Context(), n, metaUpdate); err != nil {
		t.Fatal(err)
	}
	waitNode(t, c, "breaker-0", 5*time.Second, "tainted once the breaker closes", isUnhealthy)
}

// TestMissingNVMLReportsUnknownAndKeepsRunning: on a node without a driver the
// agent says the GPUs are unmonitored, never healthy, never tainted, and stays up.
func TestMissingNVMLReportsUnknownAndKeepsRunning(t *testing.T) {
	c := apiServer(t)
	gpuNode(t, c, "no-driver")
	a := newTestAgent(t, nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")), c, nil, kubeConfig("no-driver"))
	run(t, a)
	waitNode(t, c, "no-driver", 10*time.Second, "Unknown", func(v nodeView) bool { return v.Status == corev1.ConditionUnknown })
	time.Sleep(3 * a.cfg.NVMLRetryInterval) // it retries loading the library
	got, _ := viewNode(t, c, "no-driver")
	want := nodeView{Status: corev1.ConditionUnknown, Reason: ReasonNVMLUnavailable,
		Message: "node: nvml: NVML library (libnvidia-ml.so.1) not found: the NVIDIA driver is not installed, or not mounted into the agent (nvidia runtime class); the GPUs are not monitored"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := a.Healthy(); err != nil {
		t.Errorf("the agent is not live without NVML: %v", err)
	}
}

// TestNothingIsWrittenWhenNothingChanges: a steady node sees no writes.
func TestNothingIsWrittenWhenNothingChanges(t *testing.T) {
	c := apiServer(t)
	gpuNode(t, c, "steady")
	f := newFakeNVML(t)
	a := newTestAgent(t, f, c, nil, func(cfg *Config) {
		kubeConfig("steady")(cfg)
		cfg.ResyncInterval = 100 * time.Millisecond
	})
	run(t, a)
	waitNode(t, c, "steady", 10*time.Second, "healthy", isHealthy)
	time.Sleep(2 * a.cfg.PollInterval) // the state annotation lands after the condition
	_, before := viewNode(t, c, "steady")
	time.Sleep(20 * a.cfg.PollInterval)
	_, after := viewNode(t, c, "steady")
	if before.ResourceVersion != after.ResourceVersion {
		t.Errorf("the node was written while nothing changed: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
}

// TestARestartedAgentKeepsTheFaultUntilEvidence: the fault is persisted on the
// node; a new agent on the same boot does not clear it for lack of signal.
func TestARestartedAgentKeepsTheFaultUntilEvidence(t *testing.T) {
	c := apiServer(t)
	gpuNode(t, c, "restart")
	boot := newBootIDs("boot-1")
	f1 := newFakeNVML(t)
	first := newTestAgent(t, f1, c, boot.get, kubeConfig("restart"))
	stopFirst := runStoppable(t, first)
	f1.xid(4, 119)
	waitNode(t, c, "restart", 5*time.Second, "tainted", isUnhealthy)
	stopFirst()

	second := newTestAgent(t, f1, c, boot.get, kubeConfig("restart")) // the same GPUs

	run(t, second)
	time.Sleep(4 * second.cfg.Recovery.Window)
	got, _ := viewNode(t, c, "restart")
	if !got.Tainted || got.Reason != ReasonXIDFatal || !strings.Contains(got.Message, "XID 119") {
		t.Errorf("after a restart: %+v, want still tainted for XID 119", got)
	}
	boot.set("boot-2")
	waitNode(t, c, "restart", 5*time.Second, "healthy after a reboot", isHealthy)
}

// TestDryRunWritesNothing: dry-run computes, never writes.
func TestDryRunWritesNothing(t *testing.T) {
	c := apiServer(t)
	created := gpuNode(t, c, "dry-run")
	f := newFakeNVML(t)
	a := newTestAgent(t, f, c, nil, func(cfg *Config) {
		kubeConfig("dry-run")(cfg)
		cfg.DryRun = true
	})
	f.xid(1, 79)
	run(t, a)
	time.Sleep(10 * a.cfg.PollInterval)
	_, n := viewNode(t, c, "dry-run")
	if n.ResourceVersion != created.ResourceVersion {
		t.Errorf("dry-run wrote the node: resourceVersion %s -> %s", created.ResourceVersion, n.ResourceVersion)
	}
	if evs := events(t, c, "dry-run"); len(evs) > 0 {
		t.Errorf("dry-run recorded Events: %v", evs)
	}
}

// TestAHungNVMLCallReportsUnknownAndRecovers: a call that never returns makes
// the node Unknown (not healthy, not tainted) within its deadline, the agent
// stays live, and the node is healthy again once the call returns.
func TestAHungNVMLCallReportsUnknownAndRecovers(t *testing.T) {
	c := apiServer(t)
	gpuNode(t, c, "hung-nvml")
	f := newFakeNVML(t)
	a := newTestAgent(t, f, c, nil, func(cfg *Config) {
		kubeConfig("hung-nvml")(cfg)
		withHangTimeout(cfg)
	})
	run(t, a)
	waitNode(t, c, "hung-nvml", 10*time.Second, "healthy", isHealthy)

	release := f.hang("GetTotalEccErrors")
	waitNode(t, c, "hung-nvml", 5*time.Second, "Unknown", func(v nodeView) bool {
		return v.Status == corev1.ConditionUnknown && v.Reason == ReasonNVMLUnresponsive && !v.Tainted
	})
	got, _ := viewNode(t, c, "hung-nvml")
	if !strings.Contains(got.Message, "GetTotalEccErrors") {
		t.Errorf("message %q does not name the hung call", got.Message)
	}
	if err := a.Healthy(); err != nil {
		t.Errorf("the agent is not live while NVML hangs: %v", err)
	}
	release()
	waitNode(t, c, "hung-nvml", 5*time.Second, "healthy once the call returned", isHealthy)
}
