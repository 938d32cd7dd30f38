package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"
)

// reportedError marks an error whose details were already printed, so main
// only sets the exit code.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

func isReported(err error) bool {
	var r reportedError
	return errors.As(err, &r)
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "tau",
		Short:         "Run AI jobs on shared GPU clusters from git",
		Long:          "tau validates and renders tau.yaml run configs, and starts and follows runs by pushing git refs.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newInitCmd(), newValidateCmd(), newRenderCmd(), newSchemaCmd(), newRunCmd(), newStatusCmd(), newListCmd(), newCancelCmd(), newRetryCmd(), newResumeCmd(), newLogsCmd(), newDiagnoseCmd(), newQueueCmd(), newPlatformCmd(), newFetchSourceCmd(), newEvidenceCmd(), newAuditCmd(), newGCCmd(), newLoginCmd(), newLogoutCmd(), newVersionCmd())
	return root
}
