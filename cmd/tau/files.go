package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/taugrid/taugrid/render"
)

// tauFile is one tau file found in a repository checkout.
type tauFile struct {
	Target string // "default" for tau.yaml, else the name of tau/<target>.yaml
	Rel    string // path relative to the repository root, as errors show it
	Path   string // path on disk
}

// resolveTargets turns command arguments into tau files: a target name
// ("default", "ray") or a path to a YAML file. No arguments means every tau
// file of the repository at dir.
func resolveTargets(dir string, args []string) ([]tauFile, error) {
	if len(args) == 0 {
		return allTauFiles(dir)
	}
	files := make([]tauFile, 0, len(args))
	for _, a := range args {
		if strings.HasSuffix(a, ".yaml") || strings.HasSuffix(a, ".yml") {
			files = append(files, tauFile{Target: targetOf(a), Rel: a, Path: a})
			continue
		}
		rel := render.TargetFile(a)
		files = append(files, tauFile{Target: a, Rel: rel, Path: filepath.Join(dir, rel)})
	}
	return files, nil
}

func targetOf(path string) string {
	if filepath.Base(path) == "tau.yaml" {
		return "default"
	}
	return strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".yaml"), ".yml")
}

func allTauFiles(dir string) ([]tauFile, error) {
	var files []tauFile
	if _, err := os.Stat(filepath.Join(dir, "tau.yaml")); err == nil {
		files = append(files, tauFile{Target: "default", Rel: "tau.yaml", Path: filepath.Join(dir, "tau.yaml")})
	}
	named, _ := filepath.Glob(filepath.Join(dir, "tau", "*.yaml"))
	slices.Sort(named)
	for _, p := range named {
		t := targetOf(p)
		files = append(files, tauFile{Target: t, Rel: "tau/" + t + ".yaml", Path: p})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no tau.yaml or tau/*.yaml in %s; `tau schema` describes the format", dir)
	}
	return files, nil
}

// load reads and validates one tau file.
func (f tauFile) load() (*render.RunConfig, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		if pe := (*os.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is already in the message
		}
		return nil, fmt.Errorf("%s: %w", f.Rel, err)
	}
	return render.LoadConfig(f.Rel, data)
}
