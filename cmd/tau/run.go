package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/taugrid/taugrid/api/runname"

	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/render"
	"go.yaml.in/yaml/v3"
)

// RunRefPrefix is where `tau run` pushes run refs; the controller watches it.
const RunRefPrefix = "refs/tau/runs/"

type runOptions struct {
	Dir      string
	Remote   string
	Snapshot bool
	Sign     bool
	Target   string
	Wait     bool
	Set      []string      // key=value overrides
	Status   statusOptions // where --wait reads the run
}

func newRunCmd() *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [target]",
		Short: "Run the committed tau file by pushing a run ref",
		Long: `Run starts a run of tau.yaml (or tau/<target>.yaml) at the commit you have
checked out, by pushing an annotated tag object to refs/tau/runs/<id> with
your own git: your credentials, your SSH agent, your signing key. It runs
exactly what is committed: with uncommitted changes it refuses, unless
--snapshot asks it to run the working tree as a snapshot commit (no branch
moves). The tau file is validated before anything is pushed.`,
		Example: "  tau run\n  tau run ray\n  tau run --snapshot",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Target = args[0]
			}
			return runRun(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", ".", "repository working copy")
	cmd.Flags().StringVar(&opts.Remote, "remote", "origin", "git remote to push the run ref to")
	cmd.Flags().BoolVar(&opts.Snapshot, "snapshot", false, "run the working tree, uncommitted changes included, as a snapshot commit")
	cmd.Flags().BoolVar(&opts.Sign, "sign", false, "sign the run ref (also when git's tag.gpgSign is true)")
	cmd.Flags().StringArrayVar(&opts.Set, "set", nil, "override a field for this run, e.g. --set compute.gpus=2 (repeatable)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "follow the run to its end (Ctrl-C stops following; the run goes on)")
	sourceFlags(cmd, &opts.Status)
	return cmd
}

func runRun(cmd *cobra.Command, o *runOptions) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	git := gitCLI{dir: o.Dir}
	top, err := git.run(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return usageError{fmt.Errorf("not in a git repository: run tau in your research repository's working copy (%w)", err)}
	}
	git.dir = top
	commit, snapshot, err := runCommit(ctx, git, o.Snapshot)
	if err != nil {
		return err
	}
	target := o.Target
	if target == "" {
		target = "default"
	}
	if err := runname.ValidateTarget(target); err != nil {
		return usageError{fmt.Errorf("tau run %s: %w", target, err)}
	}
	overrides, err := parseSets(o.Set)
	if err != nil {
		return err
	}
	if err := validateAt(ctx, git, commit, target, overrides); err != nil {
		return err
	}
	id := newRunID(clk.Now())
	ref := RunRefPrefix + id
	if err := pushRunRef(ctx, git, o, commit, runRequest{Target: target, Overrides: overrides}, id); err != nil {
		return err
	}
	what := "committed"
	if snapshot {
		what = "snapshot"
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Run %s requested: %s at %.12s (%s), pushed as %s to %s.\n", id, render.TargetFile(target), commit, what, ref, o.Remote)
	src, srcErr := openSource(&o.Status)
	if o.Wait && srcErr != nil {
		return srcErr
	}
	nudge(cmd, src, srcErr, git, o.Remote)
	if !o.Wait {
		fmt.Fprintf(out, "Follow it:  tau status -w %s\nLogs:       tau logs -f %s\nCancel it:  tau cancel %s\n", id, id, id)
		return nil
	}
	fmt.Fprintln(out, "Following it (Ctrl-C stops following; the run goes on):")
	return follow(cmd, src, id, time.Second)
}

// runCommit is the commit to run: HEAD when the tree is clean, a snapshot
// commit of the working tree with --snapshot, and an error otherwise.
func runCommit(ctx context.Context, git gitCLI, snapshot bool) (string, bool, error) {
	head, err := git.run(ctx, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", false, errors.New("the repository has no commit yet: commit your tau.yaml first")
	}
	dirty, err := git.run(ctx, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return "", false, err
	}
	switch {
	case dirty == "":
		return head, false, nil
	case !snapshot:
		return "", false, fmt.Errorf("you have uncommitted changes:\n%s\ntau runs exactly what is committed: commit them, or run `tau run --snapshot` to run the working tree as a snapshot commit", indentLines(dirty))
	}
	// Stage the working tree into a throwaway index, so neither the user's
	// index nor any branch changes.
	tmp, err := os.CreateTemp("", "tau-index-*")
	if err != nil {
		return "", false, err
	}
	tmp.Close()
	defer func() { _ = os.Remove(tmp.Name()) }()
	idx := git.with("GIT_INDEX_FILE=" + tmp.Name())
	for _, args := range [][]string{{"read-tree", "HEAD"}, {"add", "--all"}} {
		if _, err := idx.run(ctx, args...); err != nil {
			return "", false, err
		}
	}
	tree, err := idx.run(ctx, "write-tree")
	if err != nil {
		return "", false, err
	}
	c, err := git.run(ctx, "commit-tree", tree, "-p", head, "-m", "tau snapshot of the working tree at "+head[:12])
	return c, true, err
}

// validateAt checks the target's tau file as committed, so nothing invalid
// is ever pushed as a run request.
func validateAt(ctx context.Context, git gitCLI, commit, target string, overrides map[string]string) error {
	file := render.TargetFile(target)
	data, err := git.run(ctx, "show", commit+":"+file)
	if err != nil {
		return fmt.Errorf("%s does not exist at %.12s; `tau validate` lists the targets", file, commit)
	}
	_, err = render.LoadConfigWithOverrides(file, []byte(data+"\n"), overrides)
	return err
}

// parseSets reads --set key=value flags.
func parseSets(sets []string) (map[string]string, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want field.path=value, e.g. --set compute.gpus=2", s)
		}
		out[k] = v
	}
	return out, nil
}

// runRequest is the message of a run ref, as gitsource.ParseRunRequest reads it.
type runRequest struct {
	Target    string            `yaml:"target"`
	Overrides map[string]string `yaml:"overrides,omitempty"`
	Requester string            `yaml:"requester,omitempty"`
}

// pushRunRef creates the annotated tag object of the run request and pushes
// it to refs/tau/runs/<id>; the local tag it needs is removed again.
func pushRunRef(ctx context.Context, git gitCLI, o *runOptions, commit string, req runRequest, id string) error {
	req.Requester = committerEmail(ctx, git)
	b, err := yaml.Marshal(req)
	if err != nil {
		return err
	}
	msg := string(b)
	local := "tau-run-" + id
	args := []string{"tag", "--annotate", "--message", msg}
	if o.Sign || git.config(ctx, "tag.gpgSign") == "true" {
		args = append(args, "--sign")
	}
	if _, err := git.run(ctx, append(args, local, commit)...); err != nil {
		return err
	}
	defer func() { _, _ = git.run(context.WithoutCancel(ctx), "tag", "--delete", local) }()
	_, err = git.run(ctx, "push", "--quiet", o.Remote, "refs/tags/"+local+":"+RunRefPrefix+id)
	return pushError(err, o.Remote)
}

// nudge tells the controller that the remote changed, so it polls now
// rather than at its next interval; without the API, the poll or a webhook
// picks the change up.
func nudge(cmd *cobra.Command, src runSource, srcErr error, git gitCLI, remote string) {
	var untrusted untrustedAPIError
	if errors.As(srcErr, &untrusted) {
		fmt.Fprintf(cmd.ErrOrStderr(), "tau: the controller sees the change at its next poll (no nudge: %v)\n", srcErr)
		return
	}
	api, ok := src.(*apiSource)
	if !ok {
		return
	}
	ctx := contextOf(cmd)
	url, _ := git.run(ctx, "remote", "get-url", remote)
	if err := api.Nudge(ctx, url); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "tau: the controller sees the change at its next poll (nudge failed: %v)\n", err)
	}
}

// pushError explains a failed push in one line: a remote that does not
// exist, one that cannot be reached, or one that refuses run refs.
func pushError(err error, remote string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	why := gitSummary(msg)
	if strings.Contains(msg, "does not appear to be a git repository") {
		return usageError{fmt.Errorf("no remote %s: add the research repository's remote (git remote add %s <url>) or pass --remote", remote, remote)}
	}
	for _, s := range []string{"Could not resolve host", "unable to access", "Connection refused", "Connection timed out", "Network is unreachable",
		"Could not read from remote"} {
		if strings.Contains(msg, s) {
			return unreachableError{fmt.Errorf("cannot reach remote %s: %s", remote, why)}
		}
	}
	for _, s := range []string{"Permission", "permission", "denied", "protected", "pre-receive hook declined", "rejected"} {
		if strings.Contains(msg, s) {
			return usageError{fmt.Errorf("remote %s refused the run ref (%s): ask for push access to refs/tau/runs/*", remote, why)}
		}
	}
	return errors.New(why)
}

// gitSummary is the line of git's output that says what went wrong: the
// server's own words, else git's fatal or error line.
func gitSummary(msg string) string {
	lines := strings.Split(msg, "\n")
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, "remote: "); ok && strings.TrimSpace(rest) != "" {
			return strings.TrimSpace(rest)
		}
	}
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, "fatal: "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return strings.TrimSpace(lines[0])
}

// committerEmail is who git says is committing (config or environment).
func committerEmail(ctx context.Context, git gitCLI) string {
	ident, _ := git.run(ctx, "var", "GIT_COMMITTER_IDENT")
	if _, rest, ok := strings.Cut(ident, "<"); ok {
		email, _, _ := strings.Cut(rest, ">")
		return email
	}
	return ""
}

// newRunID is a short, sortable, unique run id.
func newRunID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "r-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

func indentLines(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
