// Package conformance checks the renderer against the real API server, the
// real Kueue and the real KubeRay operator, so that what TauGrid renders is
// what the cluster accepts and admits.
package conformance

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/taugrid/taugrid/test/controlplane"
)

var env *controlplane.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = controlplane.Start(context.Background(), controlplane.Options{Kueue: true, KubeRay: true, CRDDirectoryPaths: []string{"../../api/crds"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance: starting the control plane:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "conformance: stopping the control plane:", err)
		}
	}()
	if err := controlplane.ApplyDir(context.Background(), env.Client, "taugrid-conformance", "../../examples/platform/kueue"); err != nil {
		fmt.Fprintln(os.Stderr, "conformance: applying the example platform's Kueue objects:", err)
		return 1
	}
	return m.Run()
}
