package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/render"
	"go.yaml.in/yaml/v3"
)

type initOptions struct {
	Dir        string
	Name       string
	Image      string
	Entrypoint string
	Namespace  string
	APIURL     string
}

// projectConfig is .tau/config.yaml: where this repository's runs live.
type projectConfig struct {
	// Namespace is the team's namespace, where the TauRepository and its
	// runs are.
	Namespace string `yaml:"namespace"`
	// APIURL is the controller's read-only API, for tau status without a
	// kubeconfig. tau sends a token there only when the user logged in to
	// it: anyone can commit this file.
	APIURL string `yaml:"api_url,omitempty"`

	path string // where it was read, for messages
}

func newInitCmd() *cobra.Command {
	o := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Scaffold tau.yaml and .tau/config.yaml in an existing repository",
		Example: `  tau init -n team-a
  tau init -n team-a --api-url https://tau.example.com --image python:3.12-slim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			written, err := runInit(o)
			for _, f := range written {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", f)
			}
			if err != nil {
				return err
			}
			if o.APIURL != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Everyone who clones the repository logs in to the API once (tau sends tokens only to APIs you logged in to):\n  tau login --api-url %s\n", o.APIURL)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Next: edit tau.yaml, `tau validate`, commit, then `tau run`.")
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "repository root")
	cmd.Flags().StringVar(&o.Name, "name", "", "run name (default: the directory's name)")
	cmd.Flags().StringVar(&o.Image, "image", "python:3.12-slim", "container image")
	cmd.Flags().StringVar(&o.Entrypoint, "entrypoint", "train.py", "script to run, relative to the repository root")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "your team's namespace (required)")
	cmd.Flags().StringVar(&o.APIURL, "api-url", "", "the TauGrid API URL, written to .tau/config.yaml (https; each user still logs in to it with tau login)")
	_ = cmd.MarkFlagRequired("namespace")
	return cmd
}

// runInit writes the two files, refusing to overwrite either; the tau.yaml
// it writes is validated first.
func runInit(o *initOptions) ([]string, error) {
	name := o.Name
	if name == "" {
		abs, err := filepath.Abs(o.Dir)
		if err != nil {
			return nil, err
		}
		name = dnsLabel(filepath.Base(abs))
	}
	tau := fmt.Sprintf(`# tau.yaml: what to run. Reference: tau schema, or the README's quick reference.
schema_version: 1
name: %q
entrypoint: %q
runtime:
  image: %q
compute:
  gpus: 1
limits:
  timeout: 2h
`, name, o.Entrypoint, o.Image)
	if _, err := render.LoadConfig("tau.yaml", []byte(tau)); err != nil {
		return nil, fmt.Errorf("the flags make an invalid tau.yaml:\n%w", err)
	}
	if o.APIURL != "" {
		origin, err := originOf(o.APIURL)
		if err != nil {
			return nil, usageError{err}
		}
		if err := checkTransport(origin); err != nil {
			return nil, err
		}
	}
	cfg, err := yaml.Marshal(projectConfig{Namespace: o.Namespace, APIURL: o.APIURL})
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"tau.yaml": []byte(tau), filepath.Join(".tau", "config.yaml"): cfg}
	for _, f := range []string{"tau.yaml", filepath.Join(".tau", "config.yaml")} {
		if _, err := os.Stat(filepath.Join(o.Dir, f)); err == nil {
			return nil, fmt.Errorf("%s exists; tau init never overwrites a file", f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	var written []string
	for _, f := range []string{"tau.yaml", filepath.Join(".tau", "config.yaml")} {
		path := filepath.Join(o.Dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return written, err
		}
		if err := os.WriteFile(path, files[f], 0o644); err != nil {
			return written, err
		}
		written = append(written, f)
	}
	return written, nil
}

// dnsLabel turns a directory name into a run name.
func dnsLabel(s string) string {
	out := make([]byte, 0, len(s))
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			out = append(out, c)
		case c >= 'A' && c <= 'Z':
			out = append(out, c+'a'-'A')
		case len(out) > 0 && out[len(out)-1] != '-':
			out = append(out, '-')
		}
	}
	label := trimDashes(string(out))
	if len(label) > 40 {
		label = trimDashes(label[:40])
	}
	if label == "" {
		return "run"
	}
	return label
}

func trimDashes(s string) string {
	for len(s) > 0 && s[len(s)-1] == '-' {
		s = s[:len(s)-1]
	}
	return s
}

// projectNamespace is the namespace in the nearest .tau/config.yaml at or
// above dir, or "".
func projectNamespace(dir string) string { return loadProject(dir).Namespace }

// loadProject reads the nearest .tau/config.yaml at or above dir; empty
// when there is none.
func loadProject(dir string) projectConfig {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return projectConfig{}
	}
	for {
		path := filepath.Join(abs, ".tau", "config.yaml")
		data, err := os.ReadFile(path)
		if err == nil {
			cfg := projectConfig{path: path}
			_ = yaml.Unmarshal(data, &cfg)
			return cfg
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return projectConfig{}
		}
		abs = parent
	}
}
