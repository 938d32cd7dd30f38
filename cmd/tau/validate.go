package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/render"
)

type validateOptions struct {
	Dir       string
	PolicyDir string
	Tenant    string
}

func newValidateCmd() *cobra.Command {
	opts := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate [target|file.yaml ...]",
		Short: "Check tau files for errors, offline",
		Long: `Validate checks tau.yaml (target "default") and tau/<target>.yaml files and
prints every problem as file:line:col: field: message. With --policy it also
checks them against the platform policy, as the controller will.
Without arguments it checks every tau file of the repository.`,
		Example: "  tau validate\n  tau validate ray --policy ../platform --tenant team-a",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd, opts, args)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", ".", "repository root")
	cmd.Flags().StringVar(&opts.PolicyDir, "policy", "", "platform policy directory to check against")
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "tenant whose policy applies (default: the policy's only tenant)")
	return cmd
}

func runValidate(cmd *cobra.Command, opts *validateOptions, args []string) error {
	files, err := resolveTargets(opts.Dir, args)
	if err != nil {
		return err
	}
	var pol *render.Policy
	if opts.PolicyDir != "" {
		if pol, err = loadPolicy(opts.PolicyDir); err != nil {
			return err
		}
		if opts.Tenant, err = pickTenant(pol, opts.Tenant); err != nil {
			return err
		}
	}
	failed := 0
	for _, f := range files {
		if err := validateOne(f, pol, opts.Tenant); err != nil {
			failed++
			fmt.Fprintln(cmd.ErrOrStderr(), err)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", f.Rel)
	}
	if failed > 0 {
		return reportedError{fmt.Errorf("%d of %d files invalid", failed, len(files))}
	}
	return nil
}

func validateOne(f tauFile, pol *render.Policy, tenant string) error {
	rc, err := f.load()
	if err != nil || pol == nil {
		return err
	}
	_, err = render.Resolve(rc, pol, tenant, offlineRun(f.Target, ""))
	return err
}

func loadPolicy(dir string) (*render.Policy, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("policy directory: %w", err)
	}
	pol, err := render.LoadPolicy(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("invalid platform policy in %s:\n%w", dir, err)
	}
	return pol, nil
}

// pickTenant returns the tenant named, or the policy's only tenant.
func pickTenant(pol *render.Policy, name string) (string, error) {
	if name != "" {
		if pol.Tenant(name) == nil {
			return "", fmt.Errorf("unknown tenant %q; the policy has: %s", name, tenantNames(pol))
		}
		return name, nil
	}
	if len(pol.Tenants) == 1 {
		return pol.Tenants[0].Name, nil
	}
	return "", fmt.Errorf("the policy has several tenants (%s); choose one with --tenant", tenantNames(pol))
}

func tenantNames(pol *render.Policy) string {
	s := ""
	for i, t := range pol.Tenants {
		if i > 0 {
			s += ", "
		}
		s += t.Name
	}
	return s
}
