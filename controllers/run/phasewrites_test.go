package run

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// phaseWrites is what the histogram holds for phase: its count and sum.
func phaseWrites(t *testing.T, h *prometheus.HistogramVec, phase taugridv1.RunPhase) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := h.WithLabelValues(string(phase)).(prometheus.Histogram).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A phase written from the cluster's news is timed from the moment the
// news woke the run; a reconcile that found nothing new to write drops
// the news, and a phase written without news (no wake) is not timed.
func TestAPhaseWriteIsTimedFromTheNewsThatWokeTheRun(t *testing.T) {
	key := types.NamespacedName{Namespace: ns, Name: "r1"}
	h, err := NewPhaseWrites(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}

	// Kueue admitted the Job; its Workload's event woke the run 300 ms
	// before the reconcile's write was stored.
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns).Unsuspended()), workloadOf(true))
	clock := w.r.Clock.(*clocktesting.FakeClock)
	w.r.PhaseWrites = h
	w.r.wakesOf().woke(key, clock.Now())
	clock.Step(300 * time.Millisecond)
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, "r1").Status.Phase; got != taugridv1.PhaseAdmitted {
		t.Fatalf("phase %q, want Admitted", got)
	}
	if n, sum := phaseWrites(t, h, taugridv1.PhaseAdmitted); n != 1 || sum != 0.3 {
		t.Errorf("Admitted written %d times in %.3f s, want once in 0.300 s", n, sum)
	}

	// News that changed nothing the run says (the same Workload again):
	// the reconcile writes no phase and the news is spent, so a later
	// phase written with no news of its own is not timed from it.
	w.r.wakesOf().woke(key, clock.Now())
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.r.wakesOf().pending[key]; ok {
		t.Error("a reconcile that looked and wrote no phase kept the news")
	}
	if n, _ := phaseWrites(t, h, taugridv1.PhaseAdmitted); n != 1 {
		t.Errorf("Admitted timed %d times, want once", n)
	}
}

// A reconcile that only waits (for the cache to show the run's last
// write, or for another writer) gives the news back: the wait is timed
// from the news, across the reconciles that waited. News that comes
// while a reconcile works waits for the next one.
func TestTheNewsOfARunWaitsForTheReconcileThatActsOnIt(t *testing.T) {
	key := types.NamespacedName{Namespace: ns, Name: "r1"}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var b wakeBook

	b.woke(key, at)
	b.woke(key, at.Add(time.Second)) // the earlier news stays
	b.take(key)
	b.woke(key, at.Add(2*time.Second)) // came while the reconcile worked
	b.done(key, true)                  // it only waited
	if got := b.pending[key]; !got.Equal(at) {
		t.Fatalf("after a reconcile that waited, the news is from %s, want %s", got, at)
	}

	b.take(key)
	b.woke(key, at.Add(3*time.Second))
	if got, ok := b.written(key); !ok || !got.Equal(at) {
		t.Errorf("the phase written is timed from %s (%v), want %s", got, ok, at)
	}
	b.done(key, false)
	if got := b.pending[key]; !got.Equal(at.Add(3 * time.Second)) {
		t.Errorf("the news that came during the write is from %s, want %s", got, at.Add(3*time.Second))
	}

	b.take(key)
	b.done(key, false) // looked, nothing new
	if len(b.pending)+len(b.taken) != 0 {
		t.Errorf("news kept after a reconcile acted on it: %v, %v", b.pending, b.taken)
	}
	b.woke(key, at)
	b.forget(key)
	if len(b.pending) != 0 {
		t.Error("news of a run gone from the cluster kept")
	}
}
