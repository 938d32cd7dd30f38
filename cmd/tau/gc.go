package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// gcBatch bounds the refs one push deletes, keeping the command line short.
const gcBatch = 200

type gcOptions struct {
	refOptions
	OlderThan time.Duration
	DryRun    bool
}

func newGCCmd() *cobra.Command {
	o := &gcOptions{}
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Delete the run refs of runs that ended long ago from the remote",
		Long: "gc deletes from the remote the run refs (" + RunRefPrefix + "...) whose runs all ended more than --older-than ago.\n" +
			"A ref whose run is still going, or that no run answers to yet, is kept. Run state is read from the controller.",
		Example: `  tau gc --older-than 720h --dry-run   # what would go
  tau gc --older-than 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.OlderThan <= 0 {
				return usageError{fmt.Errorf("--older-than: want a positive duration such as 720h, got %s", o.OlderThan)}
			}
			src, err := openSource(&o.Source)
			if err != nil {
				return err
			}
			return runGC(contextOf(cmd), cmd.OutOrStdout(), src, gitCLI{dir: o.Dir}, o)
		},
	}
	refFlags(cmd, &o.refOptions)
	cmd.Flags().DurationVar(&o.OlderThan, "older-than", 0, "delete refs of runs that ended more than this long ago (required), e.g. 720h")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "list what would be deleted and delete nothing")
	return cmd
}

// runGC lists the remote's run refs and the team's runs, and deletes the
// refs the plan allows.
func runGC(ctx context.Context, w io.Writer, src runSource, git gitCLI, o *gcOptions) error {
	out, err := git.run(ctx, "ls-remote", "--refs", o.Remote, RunRefPrefix+"*")
	if err != nil {
		return fmt.Errorf("listing run refs on %s: %w", o.Remote, err)
	}
	runs, err := src.List(ctx)
	if err != nil {
		return err
	}
	plan := planGC(parseLsRemote(out), runs, clk.Now().Add(-o.OlderThan))
	for _, d := range plan {
		if d.Delete && o.DryRun {
			fmt.Fprintf(w, "would delete %s: %s\n", d.Ref, d.Why)
		} else if !d.Delete {
			fmt.Fprintf(w, "keep %s: %s\n", d.Ref, d.Why)
		}
	}
	doomed := deletions(plan)
	if o.DryRun {
		fmt.Fprintf(w, "%d of %d run refs would be deleted (dry run: nothing deleted).\n", len(doomed), len(plan))
		return nil
	}
	for batch := range slices.Chunk(doomed, gcBatch) {
		if _, err := git.run(ctx, append([]string{"push", "--quiet", o.Remote, "--delete"}, batch...)...); err != nil {
			return pushError(err, o.Remote)
		}
	}
	fmt.Fprintf(w, "%d of %d run refs deleted from %s.\n", len(doomed), len(plan), o.Remote)
	return nil
}

// gcDecision is what gc does with one run ref, and why.
type gcDecision struct {
	Ref    string
	Delete bool
	Why    string
}

// planGC decides, ref by ref in name order, which run refs to delete:
// those whose runs (every run the ref requested, at any commit) all ended
// before cutoff. A ref with a run still going, or with no run yet (not
// polled yet, or refused), is kept.
func planGC(refs map[string]string, runs []taugridv1.TauRun, cutoff time.Time) []gcDecision {
	byRef := map[string][]*taugridv1.TauRun{}
	for i := range runs {
		byRef[runs[i].Spec.Trigger.Ref] = append(byRef[runs[i].Spec.Trigger.Ref], &runs[i])
	}
	var out []gcDecision
	for _, ref := range slices.Sorted(maps.Keys(refs)) {
		out = append(out, decideGC(ref, byRef[ref], cutoff))
	}
	return out
}

func decideGC(ref string, runs []*taugridv1.TauRun, cutoff time.Time) gcDecision {
	d := gcDecision{Ref: ref}
	if len(runs) == 0 {
		d.Why = "no run answers to it yet"
		return d
	}
	var last time.Time
	for _, r := range runs {
		if !r.Status.Phase.Final() {
			d.Why = fmt.Sprintf("run %s is %s", r.Name, orDash(string(r.Status.Phase)))
			return d
		}
		end := endOf(r)
		if end.IsZero() {
			d.Why = fmt.Sprintf("run %s ended at a time it does not record", r.Name)
			return d
		}
		if end.After(last) {
			last = end
		}
	}
	if last.After(cutoff) {
		d.Why = fmt.Sprintf("ended %s ago", age(last))
		return d
	}
	d.Delete, d.Why = true, fmt.Sprintf("%s %s ago", strings.ToLower(string(runs[0].Status.Phase)), age(last))
	return d
}

// endOf is when an ended run ended: its last phase change, else its last
// attempt's end.
func endOf(r *taugridv1.TauRun) time.Time {
	if n := len(r.Status.Phases); n > 0 {
		return r.Status.Phases[n-1].Time.Time
	}
	if n := len(r.Status.Attempts); n > 0 && r.Status.Attempts[n-1].EndTime != nil {
		return r.Status.Attempts[n-1].EndTime.Time
	}
	return time.Time{}
}

func deletions(plan []gcDecision) []string {
	var refs []string
	for _, d := range plan {
		if d.Delete {
			refs = append(refs, d.Ref)
		}
	}
	return refs
}

// parseLsRemote maps the refs `git ls-remote` printed to their objects.
func parseLsRemote(out string) map[string]string {
	refs := map[string]string{}
	for line := range strings.Lines(out) {
		sha, ref, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok {
			refs[ref] = sha
		}
	}
	return refs
}
