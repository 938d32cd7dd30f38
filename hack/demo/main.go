// Command demo is `make demo`: TauGrid end to end on this machine. It starts
// the local cluster (kwok fake H200 nodes, the real Kueue and KubeRay), a
// local git server holding the example platform and research repos, and
// the controller; pushes a run tag with the real git CLI; follows the run
// through Kueue admission to completion; declares the fake nodes' blocks
// and racks in the platform repo and shows a 2-node run placed in one rack;
// and cleans everything up on exit or Ctrl-C. --multicluster runs a
// MultiKueue manager and two workers instead (multicluster.go).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctrllog.SetLogger(logr.Discard())
	keep := slices.Contains(os.Args[1:], "--keep")
	mode := ""
	for _, m := range []string{"--bench", "--recovery", "--multicluster"} {
		if slices.Contains(os.Args[1:], m) {
			mode = m[2:]
		}
	}
	if err := run(ctx, keep, mode); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
