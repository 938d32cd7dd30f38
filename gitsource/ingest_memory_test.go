package gitsource

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestDeltasResolveOnDiskWithTheSameObjects ingests the small test pack
// with a memory threshold of a few bytes, so every delta goes the on-disk
// way: the objects, their hashes and spooled contents are the same.
func TestDeltasResolveOnDiskWithTheSameObjects(t *testing.T) {
	for name, refDeltas := range map[string]bool{"offset deltas": false, "ref deltas": true} {
		t.Run(name, func(t *testing.T) {
			pack, contents := testPack(t, refDeltas)
			store, _ := openRepoStore(t.TempDir())
			defer store.close()
			sp, err := newSpool(t.TempDir(), 1<<20, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer sp.close()
			lim := testLimits
			lim.memBytes = 16
			if _, err := ingestPack(bytes.NewReader(pack), store.packDir(), lim, sp); err != nil {
				t.Fatal(err)
			}
			for h, want := range contents {
				r, _, ok, err := sp.open(h)
				if err != nil || !ok {
					t.Fatalf("blob %s not spooled: %v", h, err)
				}
				if got, _ := io.ReadAll(r); string(got) != want {
					t.Errorf("spooled blob %s differs", h)
				}
				if _, err := object.GetBlob(store.storage(), h); err != nil {
					t.Errorf("go-git cannot read blob %s: %v", h, err)
				}
			}
			if left := entries(t, store.packDir()); len(left) != 2 {
				t.Errorf("pack dir holds %v, want the pack and its index only", left)
			}
		})
	}
}

// peakHeap samples the live heap every few milliseconds until stop is
// called, and returns the largest sample above the heap at the start.
func peakHeap() (stop func() uint64) {
	prev := debug.SetGCPercent(10) // keep garbage close to the live heap
	runtime.GC()
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			rtmetrics.Read(s)
			if v := s[0].Value.Uint64(); v > base && v-base > peak.Load() {
				peak.Store(v - base)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		debug.SetGCPercent(prev)
		return peak.Load()
	}
}

// twoSimilarFiles commits two files of size bytes that differ in a few
// bytes, so git sends the second as a small delta against the first.
func twoSimilarFiles(t testing.TB, size int) (*repo, string) {
	s := newServer(t)
	r := s.newRepo("big")
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(data) // incompressible, as models and data are
	if err := os.WriteFile(r.dir+"/model-a.bin", data, 0o644); err != nil {
		t.Fatal(err)
	}
	copy(data[size/2:], "a few changed bytes in the middle")
	if err := os.WriteFile(r.dir+"/model-b.bin", data, 0o644); err != nil {
		t.Fatal(err)
	}
	data = nil
	commit := r.commit("two similar large files")
	r.git("push", "--quiet", s.bare(r.name), "HEAD:refs/heads/main") // straight to disk: the test server caps request bodies
	return r, commit
}

// fetchPeak archives commit (a shallow fetch, the ingest and the archive)
// and returns the peak heap it took.
func fetchPeak(t testing.TB, r *repo, commit string) uint64 {
	c, _ := newClient(t)
	runtime.GC()
	stop := peakHeap()
	a, err := c.Archive(ctxT(t), r.remote(), "refs/heads/main", commit)
	peak := stop()
	if err != nil {
		t.Fatal(err)
	}
	if a.Files < 2 {
		t.Fatalf("archive of %d files, want both", a.Files)
	}
	return peak
}

// TestTwoSimilarLargeFilesAreFetchedWithinAFixedMemoryBudget fetches a
// commit with two similar 64 MB files. Resolving the second against the
// first in memory takes both, 128 MB; streamed through files, the fetch
// and archive stay within a budget that does not grow with the files.
// docs/benchmarks.md has the figures for 2×400 MB.
func TestTwoSimilarLargeFilesAreFetchedWithinAFixedMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and fetches 128 MB")
	}
	const size, budget = 64 << 20, 40 << 20
	r, commit := twoSimilarFiles(t, size)
	peak := fetchPeak(t, r, commit)
	t.Logf("peak heap %d MiB fetching 2×%d MiB", peak>>20, size>>20)
	if peak > budget {
		t.Errorf("peak heap %d MiB, want at most %d MiB whatever the files' size", peak>>20, budget>>20)
	}
}

// BenchmarkFetchTwoSimilarLargeFiles reports the peak heap of fetching
// two similar files of TAU_BENCH_FILE_MB each (default 64; the figure in
// docs/benchmarks.md is 400). Outside `make test`:
//
//	TAU_BENCH_FILE_MB=400 go test ./gitsource -run XXX -bench FetchTwoSimilarLargeFiles -benchtime 1x
func BenchmarkFetchTwoSimilarLargeFiles(b *testing.B) {
	mb := 64
	if v, err := strconv.Atoi(os.Getenv("TAU_BENCH_FILE_MB")); err == nil && v > 0 {
		mb = v
	}
	r, commit := twoSimilarFiles(b, mb<<20)
	var peak uint64
	for b.Loop() {
		peak = max(peak, fetchPeak(b, r, commit))
	}
	b.ReportMetric(float64(peak>>20), "peak-heap-MiB")
	b.ReportMetric(float64(2*mb), "fetched-MB")
}
