package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/reconciler"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type statusOptions struct {
	Kubeconfig string
	Namespace  string
	Output     string
}

func statusFlags(cmd *cobra.Command, o *statusOptions) {
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "your team's namespace (default: the kubeconfig's)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "table", "table or json")
}

// runsClient reads TauRuns with the user's kubeconfig.
func runsClient(o *statusOptions) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no cluster access (kubeconfig): %w", err)
	}
	ns := o.Namespace
	if ns == "" {
		ns = projectNamespace(".")
	}
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	s := runtime.NewScheme()
	if err := taugridv1.AddToScheme(s); err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	return c, ns, err
}

func newListCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your team's runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := runsClient(o)
			if err != nil {
				return err
			}
			var list taugridv1.TauRunList
			if err := c.List(contextOf(cmd), &list, client.InNamespace(ns)); err != nil {
				return err
			}
			sort.Slice(list.Items, func(i, j int) bool {
				return list.Items[j].CreationTimestamp.Before(&list.Items[i].CreationTimestamp)
			})
			return printRuns(cmd.OutOrStdout(), o.Output, list.Items)
		},
	}
	statusFlags(cmd, o)
	return cmd
}

func newStatusCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status <run-id>",
		Short: "Show a run: phase, why it waits, what ran",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := runsClient(o)
			if err != nil {
				return err
			}
			run, err := findRun(cmd, c, ns, args[0])
			if err != nil {
				return err
			}
			if o.Output == "json" {
				return printRuns(cmd.OutOrStdout(), o.Output, []taugridv1.TauRun{*run})
			}
			printRun(cmd.OutOrStdout(), run)
			return nil
		},
	}
	statusFlags(cmd, o)
	return cmd
}

// findRun finds a run by its run id (the run ref's name), its ref, or its
// TauRun name.
func findRun(cmd *cobra.Command, c client.Client, ns, id string) (*taugridv1.TauRun, error) {
	ctx := contextOf(cmd)
	run := &taugridv1.TauRun{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, run); err == nil {
		return run, nil
	}
	ref := id
	if !strings.HasPrefix(ref, "refs/") {
		ref = RunRefPrefix + id
	}
	var list taugridv1.TauRunList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{reconciler.LabelRefHash: reconciler.RefHash(ref)}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no run %s in namespace %s yet (the controller picks a pushed run ref up within seconds)", id, ns)
	}
	return &list.Items[len(list.Items)-1], nil
}

func printRuns(w io.Writer, format string, runs []taugridv1.TauRun) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"schema_version": 1, "runs": runs})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTARGET\tCOMMIT\tPHASE\tAGE\tMESSAGE")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s\t%s\t%s\n", runID(&r), r.Spec.Target, r.Spec.Commit, orDash(string(r.Status.Phase)),
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
		fmt.Fprintf(w, "  workload: %s %s in queue %s\n", wl.Kind, wl.Name, wl.Queue)
	}
	if r.Status.ConfigDigest != "" {
		fmt.Fprintf(w, "  config: %s %s; policy at %.12s\n", r.Status.TauFile, r.Status.ConfigDigest, r.Status.PolicyCommit)
	}
	if r.Status.EvidenceURL != "" {
		fmt.Fprintf(w, "  evidence: %s\n", r.Status.EvidenceURL)
	}
}

// runID is what a researcher calls a run: its run ref's last element, or
// the TauRun name for tags and branches.
func runID(r *taugridv1.TauRun) string {
	if id, ok := strings.CutPrefix(r.Spec.Trigger.Ref, RunRefPrefix); ok {
		return id
	}
	return r.Name
}

func age(t time.Time) string {
	d := time.Since(t).Round(time.Second)
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

func truncate(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
