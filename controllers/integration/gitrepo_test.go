package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

var repoSeq atomic.Int64

// gitRepo is a working copy pushed to a bare repository on the test git
// server, driven by the real git CLI as a researcher or platform engineer
// would.
type gitRepo struct {
	t    testing.TB
	env  []string
	work string
	URL  string
}

// newGitRepo creates a bare repository on the server and a working copy
// whose first commit holds the files copied from srcDir.
func newGitRepo(t testing.TB, name, srcDir string) *gitRepo {
	t.Helper()
	name = fmt.Sprintf("%s-%d", name, repoSeq.Add(1))
	home := t.TempDir()
	r := &gitRepo{t: t, env: gittest.Env(home), work: filepath.Join(home, "work"), URL: gitServer.URL + "/" + name + ".git"}
	if err := os.MkdirAll(filepath.Dir(filepath.Join(gitRoot, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := gittest.InitBare(r.env, filepath.Join(gitRoot, name+".git")); err != nil {
		t.Fatal(err)
	}
	r.git("init", "--quiet", "--initial-branch=main", r.work)
	if err := os.CopyFS(r.work, os.DirFS(srcDir)); err != nil {
		t.Fatal(err)
	}
	r.git("-C", r.work, "remote", "add", "origin", r.URL)
	r.commit("initial")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	out, err := gittest.Git(r.env, "", nil, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// write replaces a file of the working copy.
func (r *gitRepo) write(path, content string) {
	r.t.Helper()
	full := filepath.Join(r.work, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// edit replaces old with new in a file of the working copy.
func (r *gitRepo) edit(path, old, new string) {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(r.work, path))
	if err != nil {
		r.t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		r.t.Fatalf("%s does not contain %q", path, old)
	}
	r.write(path, strings.Replace(string(data), old, new, 1))
}

// commit commits everything and pushes main; it returns the new commit.
func (r *gitRepo) commit(msg string) string {
	r.t.Helper()
	r.git("-C", r.work, "add", "-A")
	r.git("-C", r.work, "commit", "--quiet", "--allow-empty", "-m", msg)
	r.git("-C", r.work, "push", "--quiet", "--force", "origin", "main")
	return r.git("-C", r.work, "rev-parse", "HEAD")
}

// renamedCopy copies dir into a temporary directory, replacing strings in
// every file, so a test can push its own variant of an example repo.
func renamedCopy(t testing.TB, dir string, replace map[string]string) string {
	t.Helper()
	out := t.TempDir()
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(data)
		for old, new := range replace {
			s = strings.ReplaceAll(s, old, new)
		}
		return os.WriteFile(path, []byte(s), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tag creates a lightweight tag at HEAD and pushes it.
func (r *gitRepo) tag(name string) {
	r.t.Helper()
	r.git("-C", r.work, "tag", "--force", name)
	r.git("-C", r.work, "push", "--quiet", "--force", "origin", "refs/tags/"+name)
}

// deleteRemoteTag deletes a tag from the server.
func (r *gitRepo) deleteRemoteTag(name string) {
	r.t.Helper()
	r.git("-C", r.work, "push", "--quiet", "origin", ":refs/tags/"+name)
}

// runRef pushes what `tau run` pushes: an annotated tag object whose message
// is the run request, under refs/tau/runs/<id>.
func (r *gitRepo) runRef(id, message string) string {
	r.t.Helper()
	tmp := "tau-run-" + id
	r.git("-C", r.work, "tag", "--annotate", "--message", message, tmp)
	r.git("-C", r.work, "push", "--quiet", "origin", "refs/tags/"+tmp+":refs/tau/runs/"+id)
	r.git("-C", r.work, "tag", "--delete", tmp)
	return "refs/tau/runs/" + id
}
