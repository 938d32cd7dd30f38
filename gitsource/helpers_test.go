package gitsource

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// requireGit skips where the git CLI or http-backend is missing.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	if _, err := os.Stat(gittest.HTTPBackend); err != nil {
		t.Skip("git http-backend is not installed")
	}
}

// server is a real git server: `git http-backend` behind net/http/cgi.
type server struct {
	t       testing.TB
	env     []string
	backend *gittest.HTTPServer
	http    *httptest.Server
	// hook runs before each request reaches git; tests use it to change
	// the repository mid-operation.
	hook func(r *http.Request)
}

func newServer(t testing.TB) *server {
	t.Helper()
	requireGit(t)
	s := &server{t: t, env: gittest.Env(t.TempDir()), backend: &gittest.HTTPServer{Root: t.TempDir()}}
	s.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hook != nil {
			s.hook(r)
		}
		s.backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.http.Close)
	return s
}

// url is the clone URL of the repository name.
func (s *server) url(name string) string { return s.http.URL + "/" + name + ".git" }

// bare is the server-side directory of a repository.
func (s *server) bare(name string) string { return filepath.Join(s.backend.Root, name+".git") }

// git runs git in dir, failing the test on error.
func (s *server) git(dir string, args ...string) string {
	s.t.Helper()
	out, err := gittest.Git(s.env, dir, nil, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// repo is a working clone of a server repository, driven by the git CLI.
type repo struct {
	s       *server
	name    string
	dir     string
	commits int
}

// newRepo creates an empty repository on the server and a clone of it.
func (s *server) newRepo(name string) *repo {
	s.t.Helper()
	if err := gittest.InitBare(s.env, s.bare(name)); err != nil {
		s.t.Fatal(err)
	}
	dir := filepath.Join(s.t.TempDir(), name)
	s.git("", "init", "--quiet", "--initial-branch=main", dir)
	s.git(dir, "remote", "add", "origin", s.url(name))
	return &repo{s: s, name: name, dir: dir}
}

func (r *repo) git(args ...string) string {
	r.s.t.Helper()
	return r.s.git(r.dir, args...)
}

// write creates or replaces files: path, content, path, content...
func (r *repo) write(pathsAndContents ...string) *repo {
	r.s.t.Helper()
	for i := 0; i+1 < len(pathsAndContents); i += 2 {
		p := filepath.Join(r.dir, pathsAndContents[i])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.s.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(pathsAndContents[i+1]), 0o644); err != nil {
			r.s.t.Fatal(err)
		}
	}
	return r
}

// commit commits everything with message msg, a minute after the
// previous commit, and returns the SHA.
func (r *repo) commit(msg string) string {
	r.s.t.Helper()
	r.git("add", "-A")
	r.commits++
	date := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(r.commits) * time.Minute).Format(time.RFC3339)
	env := append(append([]string{}, r.s.env...), "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	if _, err := gittest.Git(env, r.dir, nil, "commit", "--quiet", "--allow-empty", "-m", msg); err != nil {
		r.s.t.Fatal(err)
	}
	return r.git("rev-parse", "HEAD")
}

// push pushes refspecs to the server.
func (r *repo) push(refspecs ...string) {
	r.s.t.Helper()
	r.git(append([]string{"push", "--quiet", "origin"}, refspecs...)...)
}

// remote is how the code under test reaches the repository.
func (r *repo) remote() Remote { return Remote{URL: r.s.url(r.name)} }

// newClient is a Client with a fresh cache, quick retries and its own
// metrics registry.
func newClient(t testing.TB, mod ...func(*Options)) (*Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := Options{
		Registerer: reg,
		CacheDir:   t.TempDir(),
		Backoff:    Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Attempts: 3},
	}
	for _, m := range mod {
		m(&opts)
	}
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// counter reads one counter of reg, labels as name=value pairs.
func counter(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// entries lists a directory's names, for checking nothing was left.
func entries(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}
