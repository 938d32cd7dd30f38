package controlplane

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

var (
	sharedOnce sync.Once
	shared     *Env
	sharedErr  error
)

// sharedEnv is one control plane, with Kueue and KubeRay, for every test in the
// package that does not start its own. It starts on first use: a run of only the
// failure tests never pays for it.
func sharedEnv(t testing.TB) *Env {
	t.Helper()
	needsControlPlane(t)
	sharedOnce.Do(func() {
		start := time.Now()
		shared, sharedErr = Start(context.Background(), Options{Kueue: true, KubeRay: true})
		if sharedErr == nil {
			fmt.Fprintf(os.Stderr, "shared control plane with Kueue and KubeRay ready in %s\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if sharedErr != nil {
		t.Fatalf("starting the shared control plane: %v", sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	// controller-runtime warns, with a stack, when its logger is never set.
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	code := m.Run()
	if shared != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "control-plane logs kept in %s\n", shared.LogDir)
			_ = shared.stop(true)
		} else if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the shared control plane: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// needsControlPlane skips a test in -short mode (make test-unit), where no
// control plane starts.
func needsControlPlane(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real control plane; run without -short")
	}
}

// create creates each object in order, failing the test on error.
func create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// eventually polls cond until it returns true or timeout passes, then fails the
// test with the last description cond gave.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, desc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
