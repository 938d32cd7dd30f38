// Command tau is the researcher's command line: validate and render tau.yaml
// offline, and start, follow and inspect runs with nothing but git and the
// controller's API.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Exit codes, for scripts.
const (
	exitOK          = 0
	exitRunFailed   = 1 // the run failed or was cancelled
	exitUsage       = 2 // bad flags, bad input, unknown run
	exitUnreachable = 3 // the git remote, the API or the cluster cannot be reached
)

// Errors that choose the exit code.
type (
	runFailedError   struct{ error }
	usageError       struct{ error }
	notFoundError    struct{ error }
	unreachableError struct{ error }
)

func (e runFailedError) Unwrap() error   { return e.error }
func (e usageError) Unwrap() error       { return e.error }
func (e notFoundError) Unwrap() error    { return e.error }
func (e unreachableError) Unwrap() error { return e.error }

func exitCode(err error) int {
	var (
		failed runFailedError
		gone   unreachableError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &failed):
		return exitRunFailed
	case errors.As(err, &gone):
		return exitUnreachable
	}
	return exitUsage
}

func main() {
	// The Kubernetes client libraries log through controller-runtime; tau
	// reports errors itself.
	ctrllog.SetLogger(logr.Discard())
	err := newRootCmd(os.Stdout, os.Stderr).Execute()
	if err != nil && !isReported(err) {
		fmt.Fprintln(os.Stderr, "tau:", err)
	}
	os.Exit(exitCode(err))
}
