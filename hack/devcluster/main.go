// Command devcluster runs a local TauGrid demo cluster: a kwok cluster (real etcd,
// kube-apiserver, controller-manager and scheduler; fake GPU nodes whose pods run
// and complete) with the real Kueue and KubeRay operator, all from the binaries
// hack/testbin.sh builds, and the platform in examples/platform/kueue applied.
//
//	go run ./hack/devcluster up       start it (a no-op if it is up)
//	go run ./hack/devcluster status   say what runs
//	go run ./hack/devcluster smoke    run a 1-GPU Job through Kueue to completion
//	go run ./hack/devcluster down     stop everything and delete the cluster
//
// State lives in $TAU_DEV_DIR, by default ${XDG_CACHE_HOME:-~/.cache}/taugrid/dev-cluster.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taugrid/taugrid/hack/devcluster/cluster"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: devcluster up|down|status|smoke")
		os.Exit(2)
	}
	// The client libraries log nothing worth showing here; without a logger,
	// controller-runtime prints a warning with a stack trace after 30 s.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, command string) error {
	c, err := cluster.New()
	if err != nil {
		return err
	}
	switch command {
	case "up":
		return c.Up(ctx, os.Stdout)
	case "down":
		return c.Down(ctx, os.Stdout)
	case "status":
		st := c.Status(ctx)
		fmt.Print(st)
		if !st.Up() {
			os.Exit(3)
		}
		return nil
	case "smoke":
		took, err := c.Smoke(ctx, 2*time.Minute)
		if err == nil {
			fmt.Printf("a suspended 1-GPU Job in team-a was admitted by Kueue and completed in %s\n", took.Round(time.Millisecond))
		}
		return err
	}
	return fmt.Errorf("unknown command %q: want up, down, status or smoke", command)
}
