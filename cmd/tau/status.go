package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	sigsyaml "sigs.k8s.io/yaml"
)

func newListCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your team's runs, newest first",
		Example: `  tau list
  tau list -o json | jq '.runs[] | select(.status.phase == "Failed") | .metadata.name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := openSource(o)
			if err != nil {
				return err
			}
			runs, err := src.List(contextOf(cmd))
			if err != nil {
				return err
			}
			return printRuns(cmd.OutOrStdout(), o.Output, runs)
		},
	}
	statusFlags(cmd, o)
	return cmd
}

func newStatusCmd() *cobra.Command {
	o := &statusOptions{}
	var watch bool
	cmd := &cobra.Command{
		Use:   "status <run-id>",
		Short: "Show a run: phase, why it waits, what ran",
		Example: `  tau status r-20261130-101500-3f9a2c
  tau status r-20261130-101500-3f9a2c -w      # follow it live until it ends
  tau status research-6a7f6196ab -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := openSource(o)
			if err != nil {
				return err
			}
			if watch {
				return follow(cmd, src, args[0], time.Second)
			}
			run, err := src.Get(contextOf(cmd), args[0])
			if err != nil {
				return err
			}
			if o.Output != "table" {
				return printObject(cmd.OutOrStdout(), o.Output, run)
			}
			printRun(cmd.OutOrStdout(), run)
			if run.Status.Phase == taugridv1.PhaseQueued {
				printStart(cmd.OutOrStdout(), cmd.ErrOrStderr(), src, contextOf(cmd), run)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the run until it ends; the exit code is the run's outcome")
	statusFlags(cmd, o)
	return cmd
}

// printObject writes v as JSON or YAML.
func printObject(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := sigsyaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return usageError{fmt.Errorf("-o %s: want table, json or yaml", format)}
}

func printRuns(w io.Writer, format string, runs []taugridv1.TauRun) error {
	if format != "table" {
		if runs == nil {
			runs = []taugridv1.TauRun{}
		}
		return printObject(w, format, map[string]any{"schema_version": 1, "runs": runs})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTARGET\tCOMMIT\tPHASE\tAGE\tMESSAGE")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s\t%s\t%s\n", truncate(runID(&r), 64), orDash(truncate(r.Spec.Target, 40)), orDash(r.Spec.Commit), orDash(string(r.Status.Phase)),
			age(r.CreationTimestamp.Time), truncate(r.Status.Message, 80))
	}
	return tw.Flush()
}

func printRun(w io.Writer, r *taugridv1.TauRun) {
	fmt.Fprintf(w, "Run %s (%s/%s)\n", runID(r), r.Namespace, r.Name)
	fmt.Fprintf(w, "  %s at %.12s, %s by %s\n", r.Spec.Target, r.Spec.Commit, r.Spec.Trigger.Ref, orDash(r.Spec.Trigger.Requester))
	fmt.Fprintf(w, "  phase: %s", orDash(string(r.Status.Phase)))
	if r.Status.Message != "" {
		fmt.Fprintf(w, " - %s", r.Status.Message)
	}
	fmt.Fprintln(w)
	for _, p := range r.Status.Phases {
		fmt.Fprintf(w, "    %-10s %s\n", p.Phase, p.Time.UTC().Format(time.RFC3339))
	}
	if wl := r.Status.Workload; wl != nil {
		fmt.Fprintf(w, "  workload: %s %s in queue %s%s\n", wl.Kind, wl.Name, wl.Queue, onCluster(wl.Cluster))
		if wl.Reason != "" && r.Status.Phase == taugridv1.PhaseQueued {
			fmt.Fprintf(w, "  why it waits:\n%s\n", indentLines("  "+strings.ReplaceAll(wl.Reason, "\n", "\n  ")))
		}
	}
	if len(r.Status.Attempts) > 1 || len(r.Status.Attempts) == 1 && r.Status.Attempts[0].FailureClass != "" {
		fmt.Fprintln(w, "  attempts:")
		for _, a := range r.Status.Attempts {
			fmt.Fprintf(w, "    %d  %-14s %s%s\n", a.Number, orDash(a.FailureClass), a.Reason, onCluster(a.Cluster))
		}
	}
	printGPUUsage(w, r)
	if p := runs.CurrentProgress(r); p != nil {
		fmt.Fprintf(w, "  progress: %d%%, as the run said at %s\n", p.Percent, p.Time.UTC().Format(time.RFC3339))
	}
	if r.Status.ConfigDigest != "" {
		fmt.Fprintf(w, "  config: %s %s; policy at %.12s\n", r.Status.TauFile, r.Status.ConfigDigest, r.Status.PolicyCommit)
	}
	if r.Status.EvidenceURL != "" {
		fmt.Fprintf(w, "  evidence: %s\n", r.Status.EvidenceURL)
	}
}

// printGPUUsage says how busy the current attempt's GPUs are, and warns
// when they are idle by the platform's rule.
func printGPUUsage(w io.Writer, r *taugridv1.TauRun) {
	n := len(r.Status.Attempts)
	if n == 0 || r.Status.Attempts[n-1].GPUUsage == nil {
		return
	}
	u := r.Status.Attempts[n-1].GPUUsage
	fmt.Fprintf(w, "  gpus: %s\n", u.Summary)
	if u.Idle && !r.Status.Phase.Final() {
		fmt.Fprintln(w, "  warning: the GPUs are idle by the platform's rule; other teams wait for them (tau logs shows what the run does)")
	}
}

// runID is what a researcher calls a run: its run ref's last element, or
// the TauRun name for tags and branches.
func runID(r *taugridv1.TauRun) string { return runs.ID(r) }

func age(t time.Time) string {
	d := clk.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncate is s's first line as one table cell of at most n characters:
// a tab, a carriage return or another control character in it would start
// a new cell or move the cursor and shift the columns after it, so each
// becomes a space; a longer line is cut at a character, not a byte, and
// ends in "…".
func truncate(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// onCluster names the worker cluster a run was dispatched to, if any.
func onCluster(cluster string) string {
	if cluster == "" {
		return ""
	}
	return ", on cluster " + cluster
}

// printStart says when a waiting run should start, estimated from the runs
// ahead of it in its queue (tau queue shows them).
func printStart(w, errw io.Writer, src runSource, ctx context.Context, run *taugridv1.TauRun) {
	rep, err := src.Queue(ctx)
	if err != nil {
		fmt.Fprintf(errw, "tau: the queue cannot be read to estimate the start: %v\n", err)
		return
	}
	for _, q := range rep.Runs {
		if q.Run == run.Name && q.Start != "" {
			pos, how := "", ""
			if q.Position > 0 {
				pos = fmt.Sprintf("#%d in queue %s: ", q.Position, q.Queue)
			}
			if strings.HasPrefix(q.Start, "starts") {
				how = ", estimated from the runs ahead (tau queue lists them)"
			}
			fmt.Fprintf(w, "  %s%s%s\n", pos, q.Start, how)
		}
	}
}
