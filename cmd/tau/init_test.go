package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInitScaffoldsAValidTauFileAndNeverOverwrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "My Project_2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := tau(t, "init", "--dir", dir, "-n", "team-a")
	if err != nil {
		t.Fatalf("tau init: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "wrote tau.yaml") || !strings.Contains(out, "wrote .tau/config.yaml") {
		t.Errorf("output = %q", out)
	}
	if _, stderr, err := tau(t, "validate", "--dir", dir); err != nil {
		t.Errorf("the scaffolded tau.yaml is invalid: %v\n%s", err, stderr)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "tau.yaml"))
	if !strings.Contains(string(data), "name: \"my-project-2\"\n") {
		t.Errorf("tau.yaml does not derive its name from the directory:\n%s", data)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, ".tau", "config.yaml"))
	if string(cfg) != "namespace: team-a\n" {
		t.Errorf(".tau/config.yaml = %q", cfg)
	}
	if ns := projectNamespace(filepath.Join(dir, "sub", "dir")); ns != "team-a" {
		t.Errorf("namespace found from a subdirectory = %q, want team-a", ns)
	}
	if _, _, err := tau(t, "init", "--dir", dir, "-n", "team-a"); err == nil || !strings.Contains(err.Error(), "never overwrites") {
		t.Errorf("a second init: err = %v, want a refusal", err)
	}
	if _, _, err := tau(t, "init", "--dir", t.TempDir(), "-n", "team-a", "--image", "Not An Image"); err == nil || !strings.Contains(err.Error(), "runtime.image") {
		t.Errorf("an invalid image: err = %v, want it named", err)
	}
}
