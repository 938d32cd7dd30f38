package main

import (
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/render"
)

type renderOptions struct {
	Dir       string
	PolicyDir string
	Tenant    string
	Output    string
	RunName   string
	Attempt   int
}

func newRenderCmd() *cobra.Command {
	opts := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render [target]",
		Short: "Print the Job or RayJob a tau file becomes under a platform policy",
		Long: `Render resolves a tau file under the platform policy and prints the suspended
Kubernetes objects the controller would submit to Kueue, without contacting
any cluster.`,
		Example: "  tau render --policy ../platform --tenant team-a\n  tau render ray --policy ../platform -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRender(cmd, opts, args)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", ".", "repository root")
	cmd.Flags().StringVar(&opts.PolicyDir, "policy", "", "platform policy directory (required)")
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "tenant whose policy applies (default: the policy's only tenant)")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "yaml", "output format: yaml or json")
	cmd.Flags().StringVar(&opts.RunName, "run-name", "", "run name (default: the config's name or the target)")
	cmd.Flags().IntVar(&opts.Attempt, "attempt", 1, "attempt number")
	_ = cmd.MarkFlagRequired("policy")
	return cmd
}

func runRender(cmd *cobra.Command, opts *renderOptions, args []string) error {
	if opts.Output != string(render.FormatYAML) && opts.Output != string(render.FormatJSON) {
		return fmt.Errorf("unknown output format %q; expected yaml or json", opts.Output)
	}
	if opts.Attempt < 1 {
		return fmt.Errorf("--attempt must be at least 1")
	}
	files, err := resolveTargets(opts.Dir, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		files = files[:1]
	}
	f := files[0]
	pol, err := loadPolicy(opts.PolicyDir)
	if err != nil {
		return err
	}
	tenant, err := pickTenant(pol, opts.Tenant)
	if err != nil {
		return err
	}
	rc, err := f.load()
	if err != nil {
		return err
	}
	name := opts.RunName
	if name == "" {
		name = rc.Name
	}
	if name == "" {
		name = f.Target
	}
	run := offlineRun(f.Target, headCommit(opts.Dir))
	run.Name, run.Attempt = name, opts.Attempt
	objs, err := render.RenderConfig(rc, pol, tenant, run)
	if err != nil {
		return err
	}
	out, err := render.Marshal(objs, render.Format(opts.Output))
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}

// offlineRun is the run metadata for rendering outside the controller.
func offlineRun(target, commit string) render.Run {
	if commit == "" {
		commit = "0000000000000000000000000000000000000000"
	}
	return render.Run{Name: target, Target: target, Commit: commit, Attempt: 1}
}

// headCommit is the commit checked out at dir, or "" outside a git repository.
func headCommit(dir string) string {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return ""
	}
	head, err := repo.Head()
	if err != nil {
		return ""
	}
	return head.Hash().String()
}
