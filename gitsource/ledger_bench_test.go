package gitsource

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// BenchmarkPollIdleByRefs polls, with nothing new, repositories of 20 and
// of 20,000 run tags (a quarter of them annotated) the way the repository
// reconciler does: list, compare the run refs' digest with the ledger's,
// keep the listing. "list" is the listing alone, so poll minus list is what the
// ledger costs on top. The advertisement is captured from git once and
// served from memory, so the figures are the client's.
func BenchmarkPollIdleByRefs(b *testing.B) {
	for _, n := range []int{20, 20_000} {
		remote := cannedRunTags(b, n)
		b.Run(fmt.Sprintf("refs=%d/list", n), func(b *testing.B) {
			client, _ := newClient(b)
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if refs, err := client.ListRefs(b.Context(), remote); err != nil || len(refs) != n+1 {
					b.Fatalf("%d refs, %v", len(refs), err)
				}
			}
			reportCPU(b, cpu)
		})
		b.Run(fmt.Sprintf("refs=%d/poll", n), func(b *testing.B) {
			client, _ := newClient(b)
			t := Triggers{}.WithDefaults()
			refs, err := client.ListRefs(b.Context(), remote)
			if err != nil {
				b.Fatal(err)
			}
			digest := RecordRunRefs(t.RunRefs(t.Watched(refs)), RunIndex{}).Digest
			prev := func(cur RefSet) (RefSet, error) { // as the repository reconciler does
				if RunRefsDigest(cur) != digest {
					b.Fatal("the listing changed")
				}
				return WithBranches(cur, RefSet{}), nil
			}
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				res, err := client.PollFrom(b.Context(), remote, prev, t)
				if err != nil || len(res.Events) != 0 || len(res.Refs) != n {
					b.Fatalf("%d refs, %d events, %v", len(res.Refs), len(res.Events), err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// cpuTime is the CPU this process has used, user and system: on a shared
// machine, wall time per operation says more about the neighbours.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64((cpuTime()-since).Microseconds())/float64(b.N), "cpu-us/op")
}

// cannedRunTags serves the advertisement of a repository with n run tags
// on one commit, a quarter of them annotated.
func cannedRunTags(b *testing.B, n int) Remote {
	s := newServer(b)
	r := s.newRepo("tags")
	c := r.write("tau.yaml", "name: a\n").commit("first")
	r.push("main")
	if err := gittest.AddRunTags(s.env, s.bare("tags"), c, "sweep", n, n/4); err != nil {
		b.Fatal(err)
	}
	return cannedAdvertisement(b, s, "tags")
}

// BenchmarkIdlePollPassesByRefs times, on 20,000 run tags held in memory,
// each pass an idle poll makes over the listing besides parsing it: the
// trigger filter, the comparison with the previous refs, and the run refs'
// digest.
func BenchmarkIdlePollPassesByRefs(b *testing.B) {
	refs := RefSet{"HEAD": {SHA: strings.Repeat("a", 40)}, "refs/heads/main": {SHA: strings.Repeat("a", 40)}}
	for i := range 20_000 {
		r := Ref{SHA: fmt.Sprintf("%040x", i)}
		if i%4 == 0 {
			r.Peeled = strings.Repeat("a", 40)
		}
		refs[fmt.Sprintf("refs/tags/run/sweep-%05d", i)] = r
	}
	t := Triggers{}.WithDefaults()
	cur := t.Watched(refs)
	b.Run("watched", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			t.Watched(refs)
		}
		reportCPU(b, cpu)
	})
	b.Run("same", func(b *testing.B) {
		cpu := cpuTime()
		defer reportCPU(b, cpu)
		for b.Loop() {
			if !sameRefs(cur, cur) {
				b.Fatal("differ")
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			RunRefsDigest(cur)
		}
		reportCPU(b, cpu)
	})
}
