package gitsource

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// BenchmarkListRefs10k lists a repository with 10,000 run refs. The
// advertisement is captured from git once and served from memory, so the
// figures are the client's: parsing, the RefSet, allocations.
func BenchmarkListRefs10k(b *testing.B) {
	s := newServer(b)
	r := s.newRepo("many")
	c := r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	writePackedRefs(b, s.bare("many"), c, 10_000)
	remote := cannedAdvertisement(b, s, "many")
	client, _ := newClient(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		refs, err := client.ListRefs(b.Context(), remote)
		if err != nil || len(refs) != 10_001 {
			b.Fatalf("%d refs, %v", len(refs), err)
		}
	}
}

// BenchmarkDetect10k compares two observations of 10,000 run refs where
// nothing changed: the cost of an idle poll after listing.
func BenchmarkDetect10k(b *testing.B) {
	refs := RefSet{}
	for i := range 10_000 {
		refs[fmt.Sprintf("refs/tau/runs/r%05d", i)] = Ref{SHA: fmt.Sprintf("%040d", i)}
	}
	g := newGraph()
	b.ReportAllocs()
	for b.Loop() {
		d, err := Detect(refs, refs, Triggers{}, g)
		if err != nil || len(d.Events) != 0 {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkArchiveLarge materialises the head of a generated repository
// of 20,000 commits and 5,000 files (about 120 MB packed), fetching it
// afresh each time. It generates the repository once into the user cache
// (about 20 s) and runs only with TAU_BENCH_LARGE=1; the side-by-side
// comparison with the git CLI is hack/bench/gitsource.
func BenchmarkArchiveLarge(b *testing.B) {
	if os.Getenv("TAU_BENCH_LARGE") != "1" {
		b.Skip("set TAU_BENCH_LARGE=1 to generate and archive a 120 MB repository")
	}
	requireGit(b)
	cache, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	root := filepath.Join(cache, "taugrid", "bench", "gitsource", "large")
	spec := gittest.LargeSpec{Commits: 20_000, Files: 5_000, AvgFileBytes: 6_000, Seed: 1}
	env := gittest.Env(b.TempDir())
	if err := gittest.GenerateLarge(env, filepath.Join(root, spec.Name()), spec); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(&gittest.HTTPServer{Root: root})
	b.Cleanup(srv.Close)
	remote := Remote{URL: srv.URL + "/" + spec.Name()}
	head, err := gittest.Git(env, filepath.Join(root, spec.Name()), nil, "rev-parse", "main")
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for b.Loop() {
		client, _ := newClient(b)
		a, err := client.Archive(b.Context(), remote, "refs/heads/main", head)
		if err != nil {
			b.Fatal(err)
		}
		size = a.Size
	}
	b.SetBytes(size)
}

// cannedAdvertisement captures repo's ref advertisement from git once and
// serves it from memory, so a benchmark's figures are the client's.
func cannedAdvertisement(b *testing.B, s *server, repo string) Remote {
	b.Helper()
	resp, err := http.Get(s.url(repo) + "/info/refs?service=git-upload-pack")
	if err != nil {
		b.Fatal(err)
	}
	adv, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	canned := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		_, _ = w.Write(adv)
	}))
	b.Cleanup(canned.Close)
	return Remote{URL: canned.URL + "/" + repo + ".git"}
}
