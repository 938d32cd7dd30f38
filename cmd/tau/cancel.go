package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/gitsource"
)

type refOptions struct {
	Dir    string
	Remote string
	Source statusOptions // the API to nudge, and --wait's
}

func refFlags(cmd *cobra.Command, o *refOptions) {
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "repository working copy")
	cmd.Flags().StringVar(&o.Remote, "remote", "origin", "git remote holding the run refs")
	sourceFlags(cmd, &o.Source)
}

func newCancelCmd() *cobra.Command {
	o := &refOptions{}
	cmd := &cobra.Command{
		Use:     "cancel <run-id>",
		Short:   "Cancel a run by deleting its run ref: git is the desired state",
		Example: `  tau cancel r-20261130-101500-3f9a2c`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := contextOf(cmd)
			id := strings.TrimPrefix(args[0], RunRefPrefix)
			git := gitCLI{dir: o.Dir}
			if _, err := git.run(ctx, "push", "--quiet", o.Remote, "--delete", RunRefPrefix+id); err != nil {
				if strings.Contains(err.Error(), "unable to delete") || strings.Contains(err.Error(), "remote ref does not exist") {
					return notFoundError{fmt.Errorf("run %s: no run ref %s%s on %s (already cancelled, or a tag run: delete its tag)", id, RunRefPrefix, id, o.Remote)}
				}
				return pushError(err, o.Remote)
			}
			src, srcErr := openSource(&o.Source)
			nudge(cmd, src, srcErr, git, o.Remote)
			fmt.Fprintf(cmd.OutOrStdout(), "Run %s cancelled: %s%s deleted from %s; the controller stops its workload.\n", id, RunRefPrefix, id, o.Remote)
			return nil
		},
	}
	refFlags(cmd, o)
	return cmd
}

func newRetryCmd() *cobra.Command {
	o := &refOptions{}
	cmd := &cobra.Command{
		Use:   "retry <run-id>",
		Short: "Run the same commit and target again, as a new run ref",
		Example: `  tau retry r-20261130-101500-3f9a2c
  tau retry r-20261130-101500-3f9a2c && tau status -w <new id>`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := contextOf(cmd)
			git := gitCLI{dir: o.Dir}
			id := strings.TrimPrefix(args[0], RunRefPrefix)
			if _, err := git.run(ctx, "fetch", "--quiet", "--no-tags", o.Remote, RunRefPrefix+id); err != nil {
				return notFoundError{fmt.Errorf("run %s: no run ref %s%s on %s: %w", id, RunRefPrefix, id, o.Remote, err)}
			}
			commit, err := git.run(ctx, "rev-parse", "FETCH_HEAD^{commit}")
			if err != nil {
				return err
			}
			req, err := gitsource.ParseRunRequest(tagMessage(ctx, git))
			if err != nil {
				return fmt.Errorf("run %s: %w", id, err)
			}
			ro := &runOptions{Dir: o.Dir, Remote: o.Remote}
			newID := newRunID(clk.Now())
			if err := pushRunRef(ctx, git, ro, commit, runRequest{Target: req.Target, Overrides: req.Overrides}, newID); err != nil {
				return err
			}
			src, srcErr := openSource(&o.Source)
			nudge(cmd, src, srcErr, git, o.Remote)
			fmt.Fprintf(cmd.OutOrStdout(), "Run %s requested again as %s: %s at %.12s.\n", id, newID, req.Target, commit)
			return nil
		},
	}
	refFlags(cmd, o)
	return cmd
}

// tagMessage is the message of the annotated tag just fetched, without its
// signature; "" for a lightweight ref.
func tagMessage(ctx context.Context, git gitCLI) string {
	raw, err := git.run(ctx, "cat-file", "tag", "FETCH_HEAD")
	if err != nil {
		return ""
	}
	_, msg, _ := strings.Cut(raw, "\n\n")
	msg, _, _ = strings.Cut(msg, "-----BEGIN")
	return msg
}

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
