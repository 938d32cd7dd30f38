package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func newLogsCmd() *cobra.Command {
	o := &statusOptions{}
	var followLog bool
	var tail int64
	cmd := &cobra.Command{
		Use:   "logs <run-id>",
		Short: "Print a run's log (its current attempt's first pod), secrets masked",
		Example: `  tau logs r-20261130-101500-3f9a2c
  tau logs -f r-20261130-101500-3f9a2c        # stream until the pod ends
  tau logs --tail 20 r-20261130-101500-3f9a2c`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := openSource(o)
			if err != nil {
				return err
			}
			return src.Logs(contextOf(cmd), args[0], followLog, tail, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVarP(&followLog, "follow", "f", false, "stream the log as it grows")
	cmd.Flags().Int64Var(&tail, "tail", -1, "only the last N lines (-1: all)")
	sourceFlags(cmd, o)
	return cmd
}

func newDiagnoseCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "diagnose <run-id>",
		Short: "Explain a failure: attempts, Kueue, pods, exit codes, log tails, events (secrets masked)",
		Example: `  tau diagnose r-20261130-101500-3f9a2c
  tau diagnose r-20261130-101500-3f9a2c -o json > diagnosis.json   # attach it to an issue`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := openSource(o)
			if err != nil {
				return err
			}
			d, err := src.Diagnose(contextOf(cmd), args[0])
			if err != nil {
				return err
			}
			if o.Output != "table" {
				return printObject(cmd.OutOrStdout(), o.Output, d)
			}
			printDiagnosis(cmd.OutOrStdout(), d)
			return nil
		},
	}
	statusFlags(cmd, o)
	return cmd
}

func printDiagnosis(w io.Writer, d *runs.Diagnosis) {
	fmt.Fprintf(w, "Run %s/%s: %s at %.12s\n", d.Namespace, d.Run, d.Target, d.Commit)
	fmt.Fprintf(w, "  phase: %s", orDash(string(d.Phase)))
	if d.Message != "" {
		fmt.Fprintf(w, " - %s", d.Message)
	}
	fmt.Fprintln(w)
	if len(d.Attempts) > 0 {
		fmt.Fprintln(w, "\nAttempts:")
		for _, a := range d.Attempts {
			fmt.Fprintf(w, "  %d  %-14s %-10s %s\n", a.Number, orDash(a.FailureClass), strings.Join(a.Nodes, ","), a.Reason)
		}
	}
	if len(d.Kueue) > 0 {
		fmt.Fprintln(w, "\nKueue:")
		for _, c := range d.Kueue {
			fmt.Fprintf(w, "  %-14s %-6s %s: %s\n", c.Type, c.Status, c.Reason, truncate(c.Message, 120))
		}
	}
	for _, p := range d.Pods {
		fmt.Fprintf(w, "\nPod %s on %s: %s %s\n", p.Name, orDash(p.Node), p.Phase, p.Reason)
		for _, cs := range p.Containers {
			switch st := cs.State; {
			case st.Terminated != nil:
				fmt.Fprintf(w, "  %s: exited %d (%s) %s\n", cs.Name, st.Terminated.ExitCode, st.Terminated.Reason, truncate(st.Terminated.Message, 100))
			case st.Waiting != nil:
				fmt.Fprintf(w, "  %s: waiting (%s) %s\n", cs.Name, st.Waiting.Reason, truncate(st.Waiting.Message, 100))
			case st.Running != nil:
				fmt.Fprintf(w, "  %s: running since %s\n", cs.Name, st.Running.StartedAt.UTC().Format(time.RFC3339))
			}
		}
		if nd, ok := d.Nodes[p.Node]; ok && p.Node != "" {
			switch {
			case !nd.Exists:
				fmt.Fprintf(w, "  node %s is gone\n", p.Node)
			case nd.GPUHealthy != "":
				fmt.Fprintf(w, "  node %s TauGPUHealthy=%s %s\n", p.Node, nd.GPUHealthy, nd.Message)
			}
		}
		if p.LogTail != "" {
			fmt.Fprintf(w, "  log tail:\n%s", indentLines(strings.TrimRight(p.LogTail, "\n"))+"\n")
		}
	}
	if len(d.Events) > 0 {
		fmt.Fprintln(w, "\nEvents:")
		for _, e := range d.Events {
			fmt.Fprintf(w, "  %s  %-7s %-28s %-12s %s\n", e.Time.UTC().Format("15:04:05"), e.Type, truncate(e.Object, 28), e.Reason, truncate(e.Message, 100))
		}
	}
	for _, t := range d.Truncated {
		fmt.Fprintf(w, "(truncated: %s)\n", t)
	}
}

func newResumeCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "resume <run-id>",
		Short: "Resume a failed run: a new attempt of the same run, from its latest complete checkpoint",
		Long: `Resume a failed run: a new attempt of the same run, from its latest complete
checkpoint, whatever its retry policy said. Unlike tau retry, which starts a
new run of the same commit, the attempt keeps the run's checkpoint directory.
It annotates the TauRun, so it needs a kubeconfig that may patch TauRuns.`,
		Example: `  tau resume r-20261130-101500-3f9a2c`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := kubeSourceFor(o.Kubeconfig, firstOf(o.Namespace, projectNamespace(".")))
			if err != nil {
				return err
			}
			return resumeRun(contextOf(cmd), k, args[0], cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "your team's namespace (default: .tau/config.yaml's, then the kubeconfig's)")
	return cmd
}

func resumeRun(ctx context.Context, k *kubeSource, id string, out io.Writer) error {
	run, err := k.Get(ctx, id)
	if err != nil {
		return err
	}
	if run.Status.Phase != taugridv1.PhaseFailed {
		return usageError{fmt.Errorf("run %s is %s: only a failed run resumes (tau retry starts a new run)", id, orDash(string(run.Status.Phase)))}
	}
	patch := client.MergeFrom(run.DeepCopy())
	if run.Annotations == nil {
		run.Annotations = map[string]string{}
	}
	run.Annotations[taugridv1.AnnotationResume] = clk.Now().UTC().Format(time.RFC3339Nano)
	if err := k.c.Patch(ctx, run, patch); err != nil {
		return k.wrap(err)
	}
	fmt.Fprintf(out, "Run %s resumes as attempt %d. Follow it: tau status -w %s\n", id, len(run.Status.Attempts)+1, id)
	return nil
}
