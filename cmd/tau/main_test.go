package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/render"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// tau runs the CLI in-process and returns its stdout, stderr and error.
func tau(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCmd(&out, &errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

const (
	research = "../../examples/research"
	platform = "../../examples/platform"
)

func TestValidateAcceptsTheExamples(t *testing.T) {
	out, stderr, err := tau(t, "validate", "--dir", research, "--policy", platform, "--tenant", "team-a")
	if err != nil {
		t.Fatalf("tau validate failed: %v\n%s", err, stderr)
	}
	want := "tau.yaml: valid\ntau/ddp.yaml: valid\ntau/ray.yaml: valid\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

// TestValidateRejectsEveryInvalidFileWithItsPosition runs the whole invalid
// corpus through the CLI: each file fails with file:line:col.
func TestValidateRejectsEveryInvalidFileWithItsPosition(t *testing.T) {
	files, _ := filepath.Glob("../../render/testdata/invalid/*.yaml")
	located := regexp.MustCompile(`^\S+\.yaml:\d+:\d+: `)
	for _, f := range files {
		_, stderr, err := tau(t, "validate", "--policy", platform, "--tenant", "team-a", f)
		if err == nil {
			t.Errorf("%s: tau validate exited 0", f)
			continue
		}
		if !isReported(err) || !located.MatchString(stderr) {
			t.Errorf("%s: stderr lacks file:line:col: %q", f, stderr)
		}
	}
}

func TestRenderPrintsASuspendedQueuedJob(t *testing.T) {
	out, stderr, err := tau(t, "render", "--dir", research, "--policy", platform, "--tenant", "team-a")
	if err != nil {
		t.Fatalf("tau render failed: %v\n%s", err, stderr)
	}
	for _, want := range []string{"kind: Job", "suspend: true", "kueue.x-k8s.io/queue-name: runs", "namespace: team-a"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "status:") {
		t.Error("output carries a status section")
	}
}

func TestRenderRayTargetAsJSON(t *testing.T) {
	out, _, err := tau(t, "render", "ray", "--dir", research, "--policy", platform, "--tenant", "team-a", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"kind": "RayJob"`) || !strings.Contains(out, `"kind": "List"`) {
		t.Errorf("want a List holding a RayJob:\n%.400s", out)
	}
}

func TestCommandErrorsAreClear(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"render needs a policy":         {[]string{"render", "--dir", research}, `required flag(s) "policy" not set`},
		"an unknown tenant is named":    {[]string{"render", "--dir", research, "--policy", platform, "--tenant", "x"}, `unknown tenant "x"; the policy has: team-a, team-b`},
		"several tenants need a choice": {[]string{"render", "--dir", research, "--policy", platform}, "the policy has several tenants (team-a, team-b); choose one with --tenant"},
		"a missing target":              {[]string{"validate", "--dir", research, "nope"}, "tau/nope.yaml: no such file or directory"},
		"an unknown format":             {[]string{"render", "--dir", research, "--policy", platform, "-o", "xml"}, `unknown output format "xml"; expected yaml or json`},
		"a directory without tau files": {[]string{"validate", "--dir", platform}, "no tau.yaml or tau/*.yaml in ../../examples/platform"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, stderr, err := tau(t, tc.args...)
			if err == nil {
				t.Fatal("succeeded; want an error")
			}
			if got := err.Error() + stderr; !strings.Contains(got, tc.want) {
				t.Errorf("error %q lacks %q", got, tc.want)
			}
		})
	}
}

func TestSchemaCommandPrintsTheGeneratedSchema(t *testing.T) {
	out, _, err := tau(t, "schema")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(render.SchemaJSON()), out); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	committed, _ := os.ReadFile("../../docs/tau.schema.json")
	if string(committed) != out {
		t.Error("docs/tau.schema.json differs from `tau schema`; run make generate")
	}
}

// Every researcher-facing command shows examples in its --help.
func TestEveryCommandHasExamples(t *testing.T) {
	for _, c := range newRootCmd(nil, nil).Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Example == "" {
			t.Errorf("tau %s --help shows no example", c.Name())
		}
	}
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // as main does
	// No test reads the tokens of the developer's own tau login.
	config, err := os.MkdirTemp("", "tau-test-config-")
	if err != nil {
		panic(err)
	}
	for _, k := range []string{"XDG_CONFIG_HOME", "AppData"} {
		_ = os.Setenv(k, config)
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" || runtime.GOOS == "plan9" { // config under HOME
		_ = os.Setenv("HOME", config)
	}
	code := m.Run()
	_ = os.RemoveAll(config)
	os.Exit(code)
}
