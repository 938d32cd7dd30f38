package render

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const examplePolicyDir = "../examples/platform"

// testRun is the run metadata every corpus file is rendered with.
var testRun = Run{
	Name:         "demo-7f3k2",
	Repository:   "research",
	Commit:       "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
	Target:       "default",
	Attempt:      1,
	PolicyCommit: "9daeafb9864cf43055ae93beb0afd6c7d144bfa4",
	Source: &SourceArchive{
		URL:    "http://tau-controller.tau-system.svc:8080/source/research/4b825dc642cb6eb9a060e54bf8d69288fbee4904.tar.gz",
		SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Image:  "ghcr.io/taugrid/tau:v0.1.0",
	},
}

func examplePolicy(t testing.TB) *Policy {
	t.Helper()
	pol, err := LoadPolicy(os.DirFS(examplePolicyDir))
	if err != nil {
		t.Fatalf("loading the example policy: %v", err)
	}
	return pol
}

// renderFile is the whole pipeline a controller runs on a tau file.
func renderFile(pol *Policy, name string, data []byte) ([]client.Object, error) {
	rc, err := LoadConfig(name, data)
	if err != nil {
		return nil, err
	}
	return RenderConfig(rc, pol, "team-a", testRun)
}

func TestInvalidCorpusGivesOneLocatedErrorAndNoObjects(t *testing.T) {
	pol := examplePolicy(t)
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 40 {
		t.Fatalf("the invalid corpus has %d files; it must keep at least 40", len(files))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := renderFile(pol, name, data)
			checkOneError(t, objs, err, name)
			golden(t, strings.TrimSuffix(path, ".yaml")+".err", []byte(err.Error()+"\n"))
		})
	}
}

func TestGeneratedBadInputGivesOneError(t *testing.T) {
	pol := examplePolicy(t)
	base := "schema_version: 1\nentrypoint: train.py\nruntime:\n  image: python:3.12\n"
	tests := map[string]struct {
		data []byte
		want string
	}{
		"a file over 1 MiB is refused before parsing": {
			data: append([]byte(base+"# "), bytes.Repeat([]byte("x"), MaxFileSize)...),
			want: "big.yaml:1:1: file is 1048647 bytes; the limit is 1048576 (1 MiB)",
		},
		"an environment larger than the platform allows": {
			data: []byte(base + "  env:\n    BLOB: " + strings.Repeat("y", 140_000) + "\n"),
			want: "big.yaml:6:5: runtime.env: environment is 140004 bytes; the platform's limit is 131072",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs, err := renderFile(pol, "big.yaml", tc.data)
			checkOneError(t, objs, err, "big.yaml")
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func checkOneError(t *testing.T, objs []client.Object, err error, file string) {
	t.Helper()
	if err == nil {
		t.Fatalf("rendered %d objects; want an error", len(objs))
	}
	if objs != nil {
		t.Errorf("rendered %d objects alongside the error; want none", len(objs))
	}
	errs := Errors(err)
	if len(errs) != 1 {
		t.Fatalf("got %d errors, want exactly one:\n%v", len(errs), err)
	}
	if !strings.HasPrefix(err.Error(), file+":") {
		t.Errorf("error %q does not start with the file name", err)
	}
}

func TestValidCorpusRendersGolden(t *testing.T) {
	pol := examplePolicy(t)
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	examples := map[string]string{
		"example-job":      "../examples/research/tau.yaml",
		"example-rayjob":   "../examples/research/tau/ray.yaml",
		"example-torchrun": "../examples/research/tau/ddp.yaml",
	}
	for _, f := range files {
		examples[strings.TrimSuffix(filepath.Base(f), ".yaml")] = f
	}
	for name, path := range examples {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := renderFile(pol, filepath.Base(path), data)
			if err != nil {
				t.Fatalf("valid file refused:\n%v", err)
			}
			checkInvariants(t, objs)
			checkImagesQualified(t, &pol.Images, objs)
			out, err := Marshal(objs, FormatYAML)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := renderFile(pol, filepath.Base(path), data)
			if out2, _ := Marshal(again, FormatYAML); !bytes.Equal(out, out2) {
				t.Errorf("two renders of the same input differ")
			}
			golden(t, filepath.Join("testdata/golden", name+".yaml"), out)
		})
	}
}

// golden compares got with a golden file, or rewrites it under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./render -update` to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// A retried attempt with checkpoints resumes: its pods get TAU_RESUME_FROM,
// the init container resolves the latest complete checkpoint of the run, and
// the pods get the termination grace the tau file asks for.
func TestRetriedAttemptResolvesItsLatestCheckpoint(t *testing.T) {
	pol := examplePolicy(t)
	data := []byte(`schema_version: 1
name: resumable
entrypoint: train.py
runtime: {image: python:3.12-slim}
compute: {gpus: 1}
storage: {data_pvc: team-a-data, checkpoint: ckpt}
resilience: {max_retries: 3, termination_grace: 2m}
`)
	rc, err := LoadConfig("tau.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	run := testRun
	run.Attempt, run.Resume, run.RetryReason = 2, true, "Preempted"
	run.Source = &SourceArchive{URL: "http://tau-controller.tau-system.svc:9090/source/x.tar.gz", SHA256: strings.Repeat("ab", 32), Image: "ghcr.io/taugrid/tau:v0.1.0"}
	objs, err := RenderConfig(rc, pol, "team-a", run)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(objs, FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/golden/resumed-attempt.yaml", out)
}
