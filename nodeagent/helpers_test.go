package nodeagent

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/kubernetes"
)

// testConfig is DefaultConfig sped up for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.NodeName = "gpu-node-1"
	c.PollInterval = 50 * time.Millisecond
	c.SlowInterval = time.Hour
	c.ResyncInterval = time.Hour
	c.NVMLRetryInterval = 100 * time.Millisecond
	c.CallTimeout = 2 * time.Second // generous: -race on 2 busy CPUs is slow
	c.EventWait = 20 * time.Millisecond
	c.APITimeout = 5 * time.Second
	c.Recovery = RecoveryPolicy{Window: 300 * time.Millisecond}
	return c
}

// newTestAgent builds an agent on lib (and kube, if not nil), with cfg changed by mutate.
func newTestAgent(t testing.TB, lib nvml.Interface, kube kubernetes.Interface, bootID func() (string, error), mutate func(*Config)) *Agent {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	if bootID == nil {
		bootID = func() (string, error) { return "boot-1", nil }
	}
	log := logr.Discard()
	if tt, ok := t.(*testing.T); ok && testing.Verbose() {
		log = testr.New(tt)
	}
	a, err := New(cfg, Deps{NVML: lib, Kube: kube, BootID: bootID, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// hangTimeout is the NVML deadline in tests that make a call hang.
const hangTimeout = 200 * time.Millisecond

func withHangTimeout(c *Config) { c.CallTimeout = hangTimeout }
