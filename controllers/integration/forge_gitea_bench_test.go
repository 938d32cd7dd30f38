package integration

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkPhaseReachesGitea measures, over b.N rounds of a run queued
// behind another on a 1-GPU queue (queueBehindABlocker, the real manager,
// API server, Kueue and Gitea), the time from a phase first seen in the
// waiting run to its status first seen on the commit, for the queued,
// admitted and succeeded phases: p50 and max each, and over all three. Both
// sides are polled every 20 ms, so the resolution is one poll and its round
// trips. ns/op is a whole round, a 1 s wait while queued included.
func BenchmarkPhaseReachesGitea(b *testing.B) {
	f := newGiteaFixture(b, "fg4")
	setGPUQuota(b, f.ns, "1", "0")
	m := startManager(b)
	defer m.stop()
	lat := map[string][]time.Duration{}
	for round := 0; b.Loop(); round++ {
		fl := f.queueBehindABlocker(b, m, round)
		for _, p := range measuredPhases {
			d, ok := fl.latency(p)
			if !ok {
				b.Fatalf("round %d: %s not seen both in the run and on the commit", round, p)
			}
			name := strings.ToLower(string(p))
			lat[name], lat["all"] = append(lat[name], d), append(lat["all"], d)
		}
	}
	for name, ds := range lat {
		b.ReportMetric(ms(pct(ds, 50)), name+"-p50-ms")
		b.ReportMetric(ms(slices.Max(ds)), name+"-max-ms")
	}
}
