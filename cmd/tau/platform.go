package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/policy/impact"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// platformDiffOptions are tau platform diff's flags.
type platformDiffOptions struct {
	Dir            string
	Base           string
	Platform       string
	Kubeconfig     string
	AcceptStranded bool
}

func newPlatformCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "platform",
		Short:   "Commands for the platform team's policy repo",
		Example: "  tau platform diff",
	}
	cmd.AddCommand(newPlatformDiffCmd())
	return cmd
}

func newPlatformDiffCmd() *cobra.Command {
	o := &platformDiffOptions{}
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Preview what your platform policy change does to each team before you merge it",
		Long: `tau platform diff compares the policy in your working tree with the policy in force
(the commit the TauPlatform's status names, or --base), against what runs in the cluster now:
per tenant, each ClusterQueue's quota before and after, the profiles, images, priorities and
queues taken away, what becomes of each queued or running run, the repositories whose runs
change queue, and the nodes no flavor covers any more.

A change that strands runs (queued runs that could never start under the new policy) exits 1
unless --accept-stranded is given. It reads the cluster with your kubeconfig, and the policy
in force from your checkout: fetch first if the commit in force is not in it.`,
		Example: `  cd platform && tau platform diff
  tau platform diff --base origin/main --dir platform
  tau platform diff --accept-stranded     # the stranded runs are expected`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := kubeSourceFor(o.Kubeconfig, "default")
			if err != nil {
				return err
			}
			return runPlatformDiff(contextOf(cmd), cmd.OutOrStdout(), c.c, o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "the policy directory of your platform repo checkout")
	cmd.Flags().StringVar(&o.Base, "base", "", "compare with this git revision of the checkout instead of the policy in force")
	cmd.Flags().StringVar(&o.Platform, "platform", "", "the TauPlatform (default: the cluster's only one)")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig to read the cluster with (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().BoolVar(&o.AcceptStranded, "accept-stranded", false, "exit 0 even when the change strands queued runs")
	return cmd
}

// runPlatformDiff prints the preview of the working tree's policy over
// the base's, with what c reads of the cluster.
func runPlatformDiff(ctx context.Context, w io.Writer, c client.Reader, o *platformDiffOptions) error {
	rev, label, err := baseRevision(ctx, c, o)
	if err != nil {
		return err
	}
	tree, err := treeAt(ctx, o.Dir, rev)
	if err != nil {
		return err
	}
	old, err := impact.Load(tree, label)
	if err != nil {
		return usageError{err}
	}
	new, err := impact.Load(os.DirFS(o.Dir), "the working tree")
	if err != nil {
		return usageError{err}
	}
	cluster, err := impact.Read(ctx, c, old.Policy)
	if err != nil {
		return unreachableError{err}
	}
	p := impact.Compute(old, new, cluster, o.AcceptStranded)
	fmt.Fprint(w, p.Body)
	if p.Failing() {
		return reportedError{runFailedError{errors.New(p.Summary)}}
	}
	return nil
}

// baseRevision is the git revision to compare with, and how the preview
// names it: --base, or the commit in force on the TauPlatform.
func baseRevision(ctx context.Context, c client.Reader, o *platformDiffOptions) (string, string, error) {
	if o.Base != "" {
		return o.Base, o.Base, nil
	}
	p, err := findPlatform(ctx, c, o.Platform)
	if err != nil {
		return "", "", err
	}
	if p.Status.Commit == "" {
		return "", "", usageError{fmt.Errorf("TauPlatform %s has no policy in force yet: compare with --base", p.Name)}
	}
	return p.Status.Commit, "the policy in force (" + p.Status.Commit[:min(12, len(p.Status.Commit))] + ")", nil
}

// findPlatform is the TauPlatform named, or the cluster's only one.
func findPlatform(ctx context.Context, c client.Reader, name string) (*taugridv1.TauPlatform, error) {
	var list taugridv1.TauPlatformList
	if err := c.List(ctx, &list); err != nil {
		return nil, unreachableError{fmt.Errorf("listing TauPlatforms: %w", err)}
	}
	var names []string
	for i := range list.Items {
		if list.Items[i].Name == name || name == "" && len(list.Items) == 1 {
			return &list.Items[i], nil
		}
		names = append(names, list.Items[i].Name)
	}
	if name == "" && len(names) == 0 {
		return nil, notFoundError{errors.New("the cluster has no TauPlatform: compare with --base")}
	}
	if name == "" {
		return nil, usageError{fmt.Errorf("the cluster has several TauPlatforms (%v): choose one with --platform", names)}
	}
	return nil, notFoundError{fmt.Errorf("no TauPlatform %s; the cluster has %v", name, names)}
}

// maxPolicyTree bounds the policy directory read from git.
const maxPolicyTree = 32 << 20

// treeAt is dir as it was at rev, read with the user's git.
func treeAt(ctx context.Context, dir, rev string) (fs.FS, error) {
	g := gitCLI{dir: dir}
	top, err := g.run(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, usageError{fmt.Errorf("%s is not in a git checkout: %w", dir, err)}
	}
	prefix, err := g.run(ctx, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, usageError{err}
	}
	if _, err := g.run(ctx, "cat-file", "-e", rev+"^{commit}"); err != nil {
		return nil, usageError{fmt.Errorf("%s is not in your checkout: fetch it first (git fetch)", rev)}
	}
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar.gz", rev+":"+prefix)
	cmd.Dir = top // git archive refuses to run in a directory it does not track
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, usageError{fmt.Errorf("reading %s at %s: %s", dir, rev, bytes.TrimSpace(stderr.Bytes()))}
	}
	return policy.Unpack(&out, rev, maxPolicyTree, maxPolicyTree, func(string) bool { return true })
}
