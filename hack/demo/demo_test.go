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
