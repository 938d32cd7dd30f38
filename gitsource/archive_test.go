package gitsource

import (
	"archive/tar"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// archiveFiles reads an archive into path -> content; directories are
// "dir", symlinks "-> target", executables get a trailing " (x)".
func archiveFiles(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, h.Name)
		if !h.ModTime.Equal(archiveTime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
			t.Errorf("%s: header not normalised: %+v", h.Name, h)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[h.Name] = "dir"
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
			if h.Mode == 0o755 {
				out[h.Name] += " (x)"
			} else if h.Mode != 0o644 {
				t.Errorf("%s: mode %o", h.Name, h.Mode)
			}
		default:
			t.Errorf("%s: unexpected type %c", h.Name, h.Typeflag)
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("entries not sorted: %q before %q", order[i-1], order[i])
		}
	}
	return out
}

func TestArchiveIsTheCommitsTreeDeterministically(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	r.write("tau.yaml", "name: a\n", "tau/ray.yaml", "name: r\n", "src/b/x.py", "print(1)\n", "src/a.py", "a\n", "run.sh", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(r.dir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../etc/passwd", filepath.Join(r.dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/a.py", filepath.Join(r.dir, "link")); err != nil {
		t.Fatal(err)
	}
	commit := r.commit("tree")
	r.push("main")
	client, reg := newClient(t)

	a, err := client.Archive(ctxT(t), r.remote(), "refs/heads/main", commit)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"escape":       "-> ../../../etc/passwd", // stored as a link, never followed
		"link":         "-> src/a.py",
		"run.sh":       "#!/bin/sh\n (x)",
		"src/":         "dir",
		"src/a.py":     "a\n",
		"src/b/":       "dir",
		"src/b/x.py":   "print(1)\n",
		"tau.yaml":     "name: a\n",
		"tau/":         "dir",
		"tau/ray.yaml": "name: r\n",
	}
	if diff := cmp.Diff(want, archiveFiles(t, a.Path)); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}
	if a.Commit != commit || a.Files != len(want) || len(a.Digest) != 64 {
		t.Errorf("archive = %+v", a)
	}
	if n := counter(t, reg, "taugrid_git_requests_total", "operation", "fetch", "result", "ok"); n != 1 {
		t.Errorf("fetches = %v, want 1", n)
	}

	t.Run("a second request is served from the cache", func(t *testing.T) {
		before := s.backend.Requests()
		again, err := client.Archive(ctxT(t), r.remote(), "refs/heads/main", commit)
		if err != nil {
			t.Fatal(err)
		}
		if *again != *a || s.backend.Requests() != before {
			t.Errorf("second archive %+v after %d requests, want %+v from the cache", again, s.backend.Requests()-before, a)
		}
	})
	t.Run("another cache builds the same bytes", func(t *testing.T) {
		other, _ := newClient(t)
		b, err := other.Archive(ctxT(t), r.remote(), "refs/heads/main", commit)
		if err != nil {
			t.Fatal(err)
		}
		if b.Digest != a.Digest {
			t.Errorf("digest %s, want %s", b.Digest, a.Digest)
		}
	})
	t.Run("built from cached objects, without the fetch's spool, it is the same", func(t *testing.T) {
		s, err := client.open(r.remote())
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		b, err := buildArchive(ctxT(t), blobSource{store: s.store}, commit, client.cache.tmpDir(), client.opts.Limits)
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(b.Path)
		if b.Digest != a.Digest {
			t.Errorf("digest %s, want %s", b.Digest, a.Digest)
		}
	})
	t.Run("the archive can be opened by digest", func(t *testing.T) {
		f, err := client.OpenArchive(a.Digest)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, err := client.OpenArchive(strings.Repeat("0", 64)); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown digest: %v", err)
		}
	})
}

func TestArchiveMatchesGitArchiveOnAPackWithDeltas(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("deltas")
	var files []string
	base := strings.Repeat("shared line of text that deltas well\n", 200)
	for i := range 40 {
		files = append(files, fmt.Sprintf("d%d/f%02d.txt", i%4, i), base+fmt.Sprintf("file %d\n", i))
	}
	r.write(files...)
	commit := r.commit("similar files")
	r.push("main")
	s.git(s.bare("deltas"), "repack", "-adf", "--depth=50", "--window=50")
	client, _ := newClient(t)
	a, err := client.Archive(ctxT(t), r.remote(), "refs/heads/main", commit)
	if err != nil {
		t.Fatal(err)
	}
	got := archiveFiles(t, a.Path)
	for i := 0; i < len(files); i += 2 {
		if got[files[i]] != files[i+1] {
			t.Fatalf("%s differs from the commit", files[i])
		}
	}
	// git itself must read the pack the ingester wrote.
	packs, _ := filepath.Glob(filepath.Join(client.cache.path("repos"), "*", "objects", "pack", "*.idx"))
	if len(packs) != 1 {
		t.Fatalf("packs = %v", packs)
	}
	out := s.git("", "verify-pack", "-v", packs[0])
	if !strings.Contains(out, "chain length") {
		t.Errorf("the pack has no deltas, the test proves nothing:\n%s", out)
	}
}

func TestArchiveFailuresAreTypedAndLeaveNothingBehind(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	r.write("big.bin", randomText(64<<10), "big2.bin", randomText(64<<10), "small", "s")
	for i := range 20 {
		r.write(fmt.Sprintf("many/%02d", i), fmt.Sprint(i))
	}
	commit := r.commit("files")
	r.push("main")
	tests := map[string]struct {
		limits Limits
		ref    string
		commit string
		want   error
		msg    string
	}{
		"an oversized file": {
			limits: Limits{MaxFileBytes: 32 << 10}, want: ErrTooLarge, msg: "big.bin: file size over the limit of 32 KiB",
		},
		"too many files": {
			limits: Limits{MaxFiles: 10}, want: ErrTooLarge, msg: "file count over the limit of 10",
		},
		"an archive over its size": {
			limits: Limits{MaxArchiveBytes: 100 << 10, MaxFileBytes: 1 << 20}, want: ErrTooLarge, msg: "big2.bin: archive size over the limit of 100 KiB",
		},
		"a repository over its size": {
			limits: Limits{MaxRepositoryBytes: 4 << 10}, want: ErrTooLarge, msg: "repository size over the limit of 4 KiB",
		},
		"a ref that does not exist": {
			ref: "refs/heads/nope", commit: strings.Repeat("a", 40), want: ErrNotFound,
		},
		"a commit that is not a SHA": {
			commit: "main", want: ErrNotFound,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client, _ := newClient(t, func(o *Options) { o.Limits = tc.limits })
			ref, c := "refs/heads/main", commit
			if tc.ref != "" {
				ref = tc.ref
			}
			if tc.commit != "" {
				c = tc.commit
			}
			a, err := client.Archive(ctxT(t), r.remote(), ref, c)
			if !errors.Is(err, tc.want) || a != nil {
				t.Fatalf("Archive = %v, %v; want %v", a, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if n := entries(t, client.cache.path("archives")); n != nil {
				t.Errorf("archives left: %v", n)
			}
			if n := entries(t, client.cache.tmpDir()); n != nil {
				t.Errorf("work files left: %v", n)
			}
			packs, _ := filepath.Glob(filepath.Join(client.cache.path("repos"), "*", "objects", "pack", "tmp_*"))
			if packs != nil {
				t.Errorf("partial packs left: %v", packs)
			}
		})
	}
}

func TestArchiveWhenTheRefChangesUnderneath(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	first := r.write("a", "1").commit("one")
	r.git("tag", "run/x")
	r.push("main", "run/x")

	t.Run("a deleted ref is not found", func(t *testing.T) {
		r.push(":refs/tags/run/x")
		s.git(s.bare("app"), "reflog", "expire", "--expire=now", "--all")
		s.git(s.bare("app"), "gc", "--prune=now", "--quiet")
		r.git("reset", "--hard", "--quiet", first)
		second := r.write("a", "2").commit("two")
		r.push("+main")
		client, _ := newClient(t)
		_, err := client.Archive(ctxT(t), r.remote(), "refs/tags/run/x", first)
		if err != nil { // first is still reachable from main's history
			t.Fatalf("a commit still reachable is served by id: %v", err)
		}
		r.push("+" + second + ":refs/heads/main")
		r.git("commit", "--quiet", "--amend", "-m", "rewritten")
		r.push("+main")
		s.git(s.bare("app"), "reflog", "expire", "--expire=now", "--all")
		s.git(s.bare("app"), "gc", "--prune=now", "--quiet")
		_, err = client.Archive(ctxT(t), r.remote(), "refs/heads/main", second)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("a force-pushed-away commit: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("a moved ref, on a server that serves only advertised tips", func(t *testing.T) {
		s.git(s.bare("app"), "config", "uploadpack.allowReachableSHA1InWant", "false")
		defer s.git(s.bare("app"), "config", "uploadpack.allowReachableSHA1InWant", "true")
		old := r.git("rev-parse", "HEAD")
		r.write("a", "3").commit("three")
		r.push("main")
		client, _ := newClient(t)
		_, err := client.Archive(ctxT(t), r.remote(), "refs/heads/main", old)
		if !errors.Is(err, ErrRefMoved) {
			t.Fatalf("err = %v, want ErrRefMoved", err)
		}
	})

	t.Run("a ref deleted during the fetch", func(t *testing.T) {
		victim := r.write("a", "4").commit("four")
		r.git("tag", "run/victim")
		r.push("run/victim")
		r.git("reset", "--hard", "--quiet", "HEAD~1")
		defer func() { s.hook = nil }()
		s.hook = func(req *http.Request) {
			if req.Method == http.MethodPost { // after the advertisement, before the pack
				s.git(s.bare("app"), "update-ref", "-d", "refs/tags/run/victim")
			}
		}
		client, _ := newClient(t)
		_, err := client.Archive(ctxT(t), r.remote(), "refs/tags/run/victim", victim)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		if n := entries(t, client.cache.path("archives")); n != nil {
			t.Errorf("archives left: %v", n)
		}
	})

	t.Run("a deleted repository", func(t *testing.T) {
		client, _ := newClient(t)
		_, err := client.Archive(ctxT(t), Remote{URL: s.url("never-existed")}, "refs/heads/main", first)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestReadFileAtACommit(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	r.write("tau.yaml", "name: a\n", "tau/ray.yaml", "name: r\n", "big", strings.Repeat("b", 4096))
	commit := r.commit("one")
	r.push("main")
	client, _ := newClient(t, func(o *Options) { o.Limits.MaxFileBytes = 1024 })
	got, err := client.ReadFile(ctxT(t), r.remote(), "refs/heads/main", commit, "tau/ray.yaml")
	if err != nil || string(got) != "name: r\n" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	before := s.backend.Requests()
	if got, err := client.ReadFile(ctxT(t), r.remote(), "refs/heads/main", commit, "tau.yaml"); err != nil || string(got) != "name: a\n" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if s.backend.Requests() != before {
		t.Error("a second file of a fetched commit went to the server")
	}
	if _, err := client.ReadFile(ctxT(t), r.remote(), "refs/heads/main", commit, "missing.yaml"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing file: err = %v", err)
	}
	if _, err := client.ReadFile(ctxT(t), r.remote(), "refs/heads/main", commit, "big"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("big file: err = %v", err)
	}
	if _, err := client.ReadFile(ctxT(t), r.remote(), "refs/heads/main", commit, "tau"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a directory: err = %v", err)
	}
}

func TestArchiveHonoursCancellation(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("app")
	commit := r.write("a", "a").commit("a")
	r.push("main")
	s.hook = func(*http.Request) { time.Sleep(200 * time.Millisecond) }
	client, _ := newClient(t, func(o *Options) { o.FetchTimeout = 50 * time.Millisecond; o.ListTimeout = 50 * time.Millisecond })
	_, err := client.Archive(ctxT(t), r.remote(), "refs/heads/main", commit)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}

// randomText is incompressible printable text.
func randomText(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestArchiveOfAHostileTree(t *testing.T) {
	s := newServer(t)
	r := s.newRepo("hostile")
	blob, err := gittest.Git(s.env, r.dir, []byte("x\n"), "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	mktree := func(entries string) string {
		sha, err := gittest.Git(s.env, r.dir, []byte(entries), "mktree")
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	gitDir := mktree("100644 blob " + blob + "\tconfig\n")
	commitOf := func(tree, branch string) string {
		c := r.git("commit-tree", tree, "-m", branch)
		r.git("update-ref", "refs/heads/"+branch, c)
		r.push(branch)
		return c
	}
	withGitDir := commitOf(mktree("040000 tree "+gitDir+"\t.git\n040000 tree "+gitDir+"\t.GiT\n100644 blob "+blob+"\tok\n"), "gitdir")
	withDotDot := commitOf(mktree("100644 blob "+blob+"\t..\n"), "dotdot")
	client, _ := newClient(t)

	a, err := client.Archive(ctxT(t), r.remote(), "refs/heads/gitdir", withGitDir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"ok": "x\n"}, archiveFiles(t, a.Path)); diff != "" {
		t.Errorf("a .git directory must not reach the archive (-want +got):\n%s", diff)
	}
	_, err = client.Archive(ctxT(t), r.remote(), "refs/heads/dotdot", withDotDot)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `".."`) {
		t.Fatalf("a .. entry: err = %v, want ErrCorrupt naming it", err)
	}
	if n := entries(t, client.cache.path("archives")); len(n) != 1 {
		t.Errorf("archives: %v, want only the first", n)
	}
}
