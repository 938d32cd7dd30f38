package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/gitsource/gittest"
)

// researcher is a working copy cloned from a real git server, driven by the
// real git CLI: what `tau run` meets on a laptop.
type researcher struct {
	t    *testing.T
	env  []string
	work string
	bare string // the server's repository
}

func newResearcher(t *testing.T) *researcher {
	t.Helper()
	root := t.TempDir()
	srv := httptest.NewServer(&gittest.HTTPServer{Root: root})
	t.Cleanup(srv.Close)
	home := t.TempDir()
	r := &researcher{t: t, env: gittest.Env(home), work: filepath.Join(home, "work"), bare: filepath.Join(root, "research.git")}
	if err := gittest.InitBare(r.env, r.bare); err != nil {
		t.Fatal(err)
	}
	r.git("init", "--quiet", "--initial-branch=main", r.work)
	if err := os.CopyFS(r.work, os.DirFS(research)); err != nil {
		t.Fatal(err)
	}
	r.git("-C", r.work, "add", "-A")
	r.git("-C", r.work, "commit", "--quiet", "-m", "research")
	r.git("-C", r.work, "remote", "add", "origin", srv.URL+"/research.git")
	r.git("-C", r.work, "push", "--quiet", "origin", "main")
	// tau runs the user's git: give it this hermetic environment.
	for _, kv := range r.env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return r
}

func (r *researcher) git(args ...string) string {
	r.t.Helper()
	out, err := gittest.Git(r.env, "", nil, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *researcher) head() string { return r.git("-C", r.work, "rev-parse", "HEAD") }

// remoteRunRefs lists refs/tau/runs/* on the server: name -> tag object.
func (r *researcher) remoteRunRefs() map[string]string {
	out := r.git("-C", r.work, "ls-remote", "origin", "refs/tau/runs/*")
	refs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if sha, name, ok := strings.Cut(line, "\t"); ok && !strings.HasSuffix(name, "^{}") {
			refs[name] = sha
		}
	}
	return refs
}

var runIDRE = regexp.MustCompile(`Run (r-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}) requested`)

func TestRunPushesOneAnnotatedRunRefForTheCommittedTarget(t *testing.T) {
	r := newResearcher(t)
	out, stderr, err := tau(t, "run", "ray", "--dir", r.work, "--set", "limits.timeout=1h")
	if err != nil {
		t.Fatalf("tau run: %v\n%s", err, stderr)
	}
	m := runIDRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("output does not name the run: %q", out)
	}
	refs := r.remoteRunRefs()
	tagSHA, ok := refs[RunRefPrefix+m[1]]
	if len(refs) != 1 || !ok {
		t.Fatalf("run refs on the server = %v, want exactly %s", refs, RunRefPrefix+m[1])
	}
	r.git("-C", r.work, "fetch", "--quiet", "origin", RunRefPrefix+m[1])
	if typ := r.git("-C", r.work, "cat-file", "-t", tagSHA); typ != "tag" {
		t.Errorf("the run ref names a %s, want an annotated tag object", typ)
	}
	if got := r.git("-C", r.work, "rev-parse", "FETCH_HEAD^{commit}"); got != r.head() {
		t.Errorf("the run ref points at %s, want HEAD %s", got, r.head())
	}
	req, err := gitsource.ParseRunRequest(tagMessage(t.Context(), gitCLI{dir: r.work}))
	if err != nil || req.Target != "ray" || req.Requester != "alice@example.com" || req.Overrides["limits.timeout"] != "1h" {
		t.Errorf("run request = %+v, %v; want target ray with limits.timeout=1h requested by alice@example.com", req, err)
	}
	if tags := r.git("-C", r.work, "tag", "--list"); tags != "" {
		t.Errorf("tau run left local tags behind: %q", tags)
	}
}

func TestRunRefusesUncommittedChangesUnlessAskedForASnapshot(t *testing.T) {
	r := newResearcher(t)
	head := r.head()
	if err := os.WriteFile(filepath.Join(r.work, "train.py"), []byte("print('changed')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := tau(t, "run", "--dir", r.work)
	if err == nil || !strings.Contains(err.Error(), "tau run --snapshot") {
		t.Fatalf("err = %v, want a refusal that suggests --snapshot", err)
	}
	if refs := r.remoteRunRefs(); len(refs) != 0 {
		t.Fatalf("a refused run pushed %v", refs)
	}
	out, stderr, err := tau(t, "run", "--snapshot", "--dir", r.work)
	if err != nil {
		t.Fatalf("tau run --snapshot: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "(snapshot)") {
		t.Errorf("output does not say it ran a snapshot: %q", out)
	}
	if r.head() != head || r.git("-C", r.work, "status", "--porcelain") != "M train.py" {
		t.Error("--snapshot moved HEAD or touched the index")
	}
	var tagSHA string
	for _, sha := range r.remoteRunRefs() {
		tagSHA = sha
	}
	r.git("-C", r.work, "fetch", "--quiet", "origin", "refs/tau/runs/*:refs/remotes/tau/*")
	snap := r.git("-C", r.work, "rev-parse", tagSHA+"^{commit}")
	if parent := r.git("-C", r.work, "rev-parse", snap+"^"); parent != head {
		t.Errorf("snapshot's parent = %s, want HEAD %s", parent, head)
	}
	if got := r.git("-C", r.work, "show", snap+":train.py"); got != "print('changed')" {
		t.Errorf("the snapshot holds train.py = %q, want the working tree's", got)
	}
}

func TestRunRefusesAnInvalidTauFileWithItsPosition(t *testing.T) {
	r := newResearcher(t)
	if err := os.WriteFile(filepath.Join(r.work, "tau.yaml"), []byte("schema_version: 1\nentrypoint: /abs.py\nruntime: {image: python:3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("-C", r.work, "commit", "--quiet", "-am", "break it")
	_, _, err := tau(t, "run", "--dir", r.work)
	if err == nil || !strings.Contains(err.Error(), "tau.yaml:2:13: entrypoint:") {
		t.Fatalf("err = %v, want tau.yaml:2:13", err)
	}
	if refs := r.remoteRunRefs(); len(refs) != 0 {
		t.Errorf("an invalid tau file was pushed as %v", refs)
	}
}

func TestRunRefusesAnOverrideThePolicyOrSchemaWouldRefuse(t *testing.T) {
	r := newResearcher(t)
	_, _, err := tau(t, "run", "--dir", r.work, "--set", "compute.gpus=-3")
	if err == nil || !strings.Contains(err.Error(), "(--set compute.gpus=-3): compute.gpus: must be between 0 and 64") {
		t.Fatalf("err = %v, want the override named", err)
	}
	if refs := r.remoteRunRefs(); len(refs) != 0 {
		t.Errorf("a refused override was pushed as %v", refs)
	}
}

func TestCancelDeletesTheRunRefAndRetryPushesANewOneForTheSameCommit(t *testing.T) {
	r := newResearcher(t)
	out, _, err := tau(t, "run", "ray", "--dir", r.work)
	if err != nil {
		t.Fatal(err)
	}
	id := runIDRE.FindStringSubmatch(out)[1]
	out, stderr, err := tau(t, "retry", id, "--dir", r.work)
	if err != nil {
		t.Fatalf("tau retry: %v\n%s", err, stderr)
	}
	refs := r.remoteRunRefs()
	if len(refs) != 2 {
		t.Fatalf("run refs after retry = %v, want the original and the retry", refs)
	}
	if !strings.Contains(out, "requested again as r-") || !strings.Contains(out, "ray at") {
		t.Errorf("retry output = %q", out)
	}
	if _, _, err := tau(t, "cancel", id, "--dir", r.work); err != nil {
		t.Fatal(err)
	}
	if _, still := r.remoteRunRefs()[RunRefPrefix+id]; still {
		t.Error("tau cancel left the run ref on the server")
	}
}

// Every way tau run can meet bad ground ends in one line saying what to
// do, the exit code for it, and nothing half-done: no run ref pushed, no
// local tag object left behind.
func TestRunFailsCleanlyWithOneLineAndItsExitCode(t *testing.T) {
	r := newResearcher(t)
	protect := func() {
		hook := filepath.Join(r.bare, "hooks", "pre-receive")
		script := "#!/bin/sh\nwhile read old new ref; do case $ref in refs/tau/*) echo \"refs/tau/ is protected\" >&2; exit 1;; esac; done\n"
		if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func()
		args  []string
		code  int
		msg   string
	}{
		{"not a git repository", nil, []string{"run", "--dir", t.TempDir()}, exitUsage, "not in a git repository"},
		{"no such remote", nil, []string{"run", "--dir", r.work, "--remote", "upstream"}, exitUsage, "no remote upstream"},
		{"a malformed --set", nil, []string{"run", "--dir", r.work, "--set", "gpus"}, exitUsage, "want field.path=value"},
		{"a target the cluster would refuse", func() {
			if err := os.WriteFile(filepath.Join(r.work, "tau", "exp.v2.yaml"), []byte("placeholder\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r.git("-C", r.work, "add", "-A")
			r.git("-C", r.work, "commit", "--quiet", "-m", "a dotted target")
		}, []string{"run", "exp.v2", "--dir", r.work}, exitUsage, `"exp.v2" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/exp-v2.yaml?)`},
		{"the network down", func() { r.git("-C", r.work, "remote", "add", "down", "http://127.0.0.1:1/research.git") },
			[]string{"run", "--dir", r.work, "--remote", "down"}, exitUnreachable, "cannot reach remote down"},
		{"a protected ref namespace", protect, []string{"run", "--dir", r.work}, exitUsage, "remote origin refused the run ref"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			_, _, err := tau(t, tc.args...)
			if err == nil || exitCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v (exit %d), want exit %d with %q", err, exitCode(err), tc.code, tc.msg)
			}
			if strings.Count(err.Error(), "\n") > 1 {
				t.Errorf("more than one line: %q", err)
			}
			if tags := r.git("-C", r.work, "tag", "--list", "tau-run-*"); tags != "" {
				t.Errorf("local tag objects left behind: %s", tags)
			}
			if refs := r.remoteRunRefs(); len(refs) != 0 {
				t.Errorf("run refs pushed: %v", refs)
			}
		})
	}
}

// A detached HEAD is a commit like any other: it runs.
func TestRunRunsADetachedHead(t *testing.T) {
	r := newResearcher(t)
	r.git("-C", r.work, "checkout", "--quiet", "--detach")
	out, stderr, err := tau(t, "run", "--dir", r.work)
	if err != nil {
		t.Fatalf("tau run on a detached HEAD: %v\n%s", err, stderr)
	}
	if !runIDRE.MatchString(out) || len(r.remoteRunRefs()) != 1 {
		t.Errorf("out = %q, refs = %v; want one run ref", out, r.remoteRunRefs())
	}
}
