package controllers

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/taugrid/taugrid/"

// imports are the module's packages (by path inside the module) and what
// each imports, tests included, read from the source as go/build does.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
			return filepath.SkipDir // a nested module
		}
		p, err := build.ImportDir(path, build.ImportComment)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil // a folder of no Go package
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		all := append(append(append([]string{}, p.Imports...), p.TestImports...), p.XTestImports...)
		for _, imp := range all {
			out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], strings.TrimPrefix(imp, module))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out["controllers/run"]) == 0 {
		t.Fatalf("read no imports of controllers/run: %v", out)
	}
	return out
}

// controller is the controller a package path belongs to, "" when none:
// shared and integration are not controllers.
func controller(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, "controllers/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	if name == "shared" || name == "integration" {
		return ""
	}
	return name
}

// TestNoControllerImportsAnother: controllers talk through the API, so a
// change to one never reaches into another, and each is tested alone.
func TestNoControllerImportsAnother(t *testing.T) {
	for pkg, imps := range imports(t) {
		for _, imp := range imps {
			from, to := controller(pkg), controller(imp)
			switch {
			case from != "" && to != "" && from != to:
				t.Errorf("controller %s imports controller %s (%s): talk through the API instead", pkg, to, imp)
			case strings.HasPrefix(pkg, "controllers/shared") && controller(imp) != "":
				t.Errorf("shared imports %s: the shared plumbing imports no controller", imp)
			case from != "" && strings.HasPrefix(imp, "nodeagent"):
				t.Errorf("%s imports the node agent's %s: read its wire types from api/", pkg, imp)
			}
		}
	}
}

// TestOnlyTheWiringImportsControllers: the packages beside controllers/
// (render, policy, forge, gitsource, ...) are peers the controllers use,
// never the other way round; only main, the tests and hack/ wire
// controllers.
func TestOnlyTheWiringImportsControllers(t *testing.T) {
	for pkg, imps := range imports(t) {
		if strings.HasPrefix(pkg, "controllers") || strings.HasPrefix(pkg, "cmd/tau-controller") ||
			strings.HasPrefix(pkg, "hack/") || strings.HasPrefix(pkg, "test/") {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, "controllers/") {
				t.Errorf("%s imports %s: only cmd/tau-controller wires controllers", pkg, imp)
			}
		}
	}
}

// TestGitKnowsNoKubernetesTypes: gitsource is git, and nothing of the
// cluster's objects, so it can be read, tested and reused alone.
func TestGitKnowsNoKubernetesTypes(t *testing.T) {
	for pkg, imps := range imports(t) {
		if pkg != "gitsource" {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, "api/v1alpha1") || strings.HasPrefix(imp, "k8s.io/api") ||
				strings.HasPrefix(imp, "k8s.io/apimachinery") || strings.HasPrefix(imp, "sigs.k8s.io/") {
				t.Errorf("gitsource imports %s", imp)
			}
		}
	}
}
