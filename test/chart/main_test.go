package chart

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taugrid/taugrid/test/controlplane"
)

// The control plane (API server, etcd, and Kueue's and KubeRay's CRDs)
// starts on first use: the render and schema tests never pay for it.
var (
	envOnce sync.Once
	env     *controlplane.Env
	envErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// apiServer skips a test in -short mode (make test-unit), else returns the
// package's control plane with the chart's CRDs and a minimal copy of the
// Prometheus Operator's installed.
func apiServer(t testing.TB) *controlplane.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real control plane; run without -short")
	}
	envOnce.Do(func() {
		env, envErr = controlplane.Start(context.Background(), controlplane.Options{
			CRDDirectoryPaths: []string{filepath.Join(Dir(), "crds"), "testdata/monitoring-crds"}})
	})
	if envErr != nil {
		t.Fatalf("starting the control plane: %v", envErr)
	}
	return env
}
