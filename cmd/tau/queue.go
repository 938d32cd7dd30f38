package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
)

func newQueueCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Your team's quota, what is in use and borrowed, and your runs in queue order",
		Example: `  tau queue
  tau queue -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := openSource(o)
			if err != nil {
				return err
			}
			rep, err := src.Queue(contextOf(cmd))
			if err != nil {
				return err
			}
			if o.Output != "table" {
				return printObject(cmd.OutOrStdout(), o.Output, rep)
			}
			printQueue(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	statusFlags(cmd, o)
	return cmd
}

func printQueue(w io.Writer, rep *runs.QueueReport) {
	for _, q := range rep.Queues {
		fmt.Fprintf(w, "Queue %s → ClusterQueue %s", q.LocalQueue, q.ClusterQueue)
		if q.Cohort != "" {
			fmt.Fprintf(w, " (cohort %s)", q.Cohort)
		}
		fmt.Fprintf(w, ": %d admitted, %d pending\n", q.Admitted, q.Pending)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  FLAVOR\tRESOURCE\tNOMINAL\tBORROWING LIMIT\tIN USE\tBORROWED")
		for _, r := range q.Quota {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.Flavor, r.Resource, r.Nominal, r.BorrowingLimit, r.InUse, r.Borrowed)
		}
		_ = tw.Flush()
	}
	if len(rep.Runs) == 0 {
		fmt.Fprintln(w, "\nNo run holds or waits for quota.")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tRUN\tQUEUE\tGPUS\tPHASE\tSTART\tMESSAGE")
	for _, r := range rep.Runs {
		pos := "-"
		if r.Position > 0 {
			pos = fmt.Sprint(r.Position)
		}
		id := r.Run
		if rid, ok := strings.CutPrefix(r.Ref, RunRefPrefix); ok {
			id = rid
		}
		gpus := "-"
		if r.GPUs > 0 {
			gpus = fmt.Sprint(r.GPUs)
		}
		start := "holds quota"
		if r.Phase == taugridv1.PhaseQueued {
			start = truncate(r.Start, 80)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", pos, truncate(id, 64), orDash(r.Queue), gpus, orDash(string(r.Phase)), start, truncate(r.Message, 100))
	}
	_ = tw.Flush()
}
