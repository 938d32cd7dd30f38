package main

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestDemo is `make demo` as a test, in a private cluster: the real
// tau-controller binary, git server, Kueue and the tau CLI. A run tag runs to
// the end; then tau run --wait, tau retry and tau status -w, through the
// controller's API with a team token, each exit 0.
func TestDemo(t *testing.T) {
	if testing.Short() || os.Getenv("TAU_TESTBIN") == "" {
		t.Skip("needs the control-plane binaries (make test sets TAU_TESTBIN)")
	}
	ctrllog.SetLogger(logr.Discard())
	t.Setenv("TAU_DEV_DIR", t.TempDir())
	if err := run(context.Background(), false, ""); err != nil {
		t.Fatal(err)
	}
}

// TestDemoMulticluster is `make demo-multicluster` as a test: a MultiKueue
// manager and two workers (three API servers, etcds and Kueues), the real
// tau-controller and tau. A pushed run tag lands on the worker with free
// GPUs; tau status names it, tau logs -f streams the pod's lines from it,
// and the run succeeds. It starts three control planes (45 to 90 s on a
// loaded machine), so it runs only when asked: TAU_DEMO_MULTICLUSTER=1
// (make demo-multicluster runs the same).
func TestDemoMulticluster(t *testing.T) {
	if testing.Short() || os.Getenv("TAU_TESTBIN") == "" {
		t.Skip("needs the control-plane binaries (make test sets TAU_TESTBIN)")
	}
	if os.Getenv("TAU_DEMO_MULTICLUSTER") != "1" {
		t.Skip("starts three control planes (45 to 90 s); set TAU_DEMO_MULTICLUSTER=1 to run it")
	}
	ctrllog.SetLogger(logr.Discard())
	if err := run(context.Background(), false, "multicluster"); err != nil {
		t.Fatal(err)
	}
}
