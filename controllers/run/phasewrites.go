package run

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
)

// MetricPhaseWrite is how long after the cluster's news of a run reached
// the controller (its Workload admitted, a pod running, its Job ended, as
// the informers delivered them) the run's new phase was stored: the
// controller's own part of how far a run's phase is behind the cluster,
// its work queue, its reconcile and the status write, by the phase
// written. What the API server takes to deliver the news to the informers
// is not in it; hack/scale measures the whole from outside, and prints
// this beside it, so each part of a phase's lag has its figure.
const MetricPhaseWrite = "taugrid_run_phase_write_seconds"

// NewPhaseWrites registers MetricPhaseWrite on reg.
func NewPhaseWrites(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricPhaseWrite,
		Help:    "Seconds from the cluster's news of a run reaching the controller (its Workload, Job or pods changed) to the run's new phase stored, by that phase.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60},
	}, []string{"phase"})
	return h, reg.Register(h)
}

// wakeBook is, for each run, when the cluster's news first woke it since
// a reconcile last took the news: the start of the wait that a phase
// written from that news ends. A reconcile takes its run's wake when it
// begins; news that comes while it works waits for the next one.
type wakeBook struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]time.Time // woken, no reconcile begun since
	taken   map[types.NamespacedName]time.Time // taken by the reconcile under way
}

// woke notes news of run at now; an earlier wake not yet taken stays.
func (b *wakeBook) woke(run types.NamespacedName, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending, b.taken = map[types.NamespacedName]time.Time{}, map[types.NamespacedName]time.Time{}
	}
	if _, ok := b.pending[run]; !ok {
		b.pending[run] = now
	}
}

// take hands run's wake, if any, to the reconcile that begins.
func (b *wakeBook) take(run types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at, ok := b.pending[run]; ok {
		delete(b.pending, run)
		b.taken[run] = at
	}
}

// written reports, once, the wake the reconcile under way took.
func (b *wakeBook) written(run types.NamespacedName) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.taken[run]
	delete(b.taken, run)
	return at, ok
}

// done ends the reconcile's hold on run's wake. One that only waited (for
// the cache, for the run held by another writer, or refused as stale)
// gives it back, so the wait goes on from the news; one that looked and
// had no new phase to write drops it.
func (b *wakeBook) done(run types.NamespacedName, waited bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.taken[run]
	if !ok {
		return
	}
	delete(b.taken, run)
	if cur, later := b.pending[run]; waited && (!later || at.Before(cur)) {
		b.pending[run] = at
	}
}

// forget drops what is noted of run (gone from the cluster).
func (b *wakeBook) forget(run types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pending, run)
	delete(b.taken, run)
}

var wakesInit sync.Mutex

// wakesOf is the reconciler's wake book, made on first use (a reconciler
// built as a struct literal, as tests build them, needs no constructor).
func (r *RunReconciler) wakesOf() *wakeBook {
	wakesInit.Lock()
	defer wakesInit.Unlock()
	if r.wakes == nil {
		r.wakes = &wakeBook{}
	}
	return r.wakes
}

// notePhaseWrite records a stored status write of run that moved its
// phase from was: how long after the news that woke it.
func (r *RunReconciler) notePhaseWrite(key types.NamespacedName, was, now taugridv1.RunPhase) {
	at, ok := r.wakesOf().written(key)
	if !ok || was == now || r.PhaseWrites == nil {
		return
	}
	r.PhaseWrites.WithLabelValues(string(now)).Observe(r.Clock.Now().Sub(at).Seconds())
}
