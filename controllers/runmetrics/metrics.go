package runmetrics

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// Names of the controller's own metrics (besides taugrid_git_* from
// gitsource and taugrid_forge_* from reconciler/forge).
const (
	MetricRuns               = "taugrid_runs"
	MetricRunAttemptsFailed  = "taugrid_run_attempts_failed"
	MetricRunQueueWait       = "taugrid_run_queue_wait_seconds"
	MetricRunOldestQueued    = "taugrid_run_oldest_queued_seconds"
	MetricRunGPUsIdle        = "taugrid_run_gpus_idle"
	runCollectorListDeadline = 10 * time.Second
)

// queueWaitBuckets span a free queue (seconds) to a busy weekend (days).
var queueWaitBuckets = []float64{1, 10, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 72 * 3600}

var (
	runsDesc = prometheus.NewDesc(MetricRuns,
		"TauRuns in the cluster by namespace and phase.", []string{"namespace", "phase"}, nil)
	attemptsFailedDesc = prometheus.NewDesc(MetricRunAttemptsFailed,
		"Failed attempts recorded in the status of the TauRuns in the cluster, by namespace and failure class.",
		[]string{"namespace", "class"}, nil)
	queueWaitDesc = prometheus.NewDesc(MetricRunQueueWait,
		"Time from Queued to admission of the attempts of the TauRuns in the cluster (recomputed at each scrape from "+
			"status.phases: use it without rate()).", []string{"namespace"}, nil)
	oldestQueuedDesc = prometheus.NewDesc(MetricRunOldestQueued,
		"How long the longest-waiting TauRun now in Queued has waited, by namespace.", []string{"namespace"}, nil)
	gpusIdleDesc = prometheus.NewDesc(MetricRunGPUsIdle,
		"GPUs of each running TauRun's attempt that are idle by the platform's rule (limits.yaml idle_gpu_percent for idle_gpu_time); "+
			"0 for a running attempt whose GPUs are read and busy.", []string{"namespace", "run"}, nil)
)

// RunCollector exports the state of the TauRuns at scrape time, read from
// the manager's cache: nothing is counted in memory, so a restart reports
// the same figures. Only the leader exports them, so that sums over the
// replicas' series count each run once.
type RunCollector struct {
	Client client.Reader
	Clock  clock.PassiveClock
	Log    logr.Logger
	// Elected is closed once this replica leads (the manager's Elected());
	// nil: always export.
	Elected <-chan struct{}
}

// Describe implements prometheus.Collector.
func (c *RunCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{runsDesc, attemptsFailedDesc, queueWaitDesc, oldestQueuedDesc, gpusIdleDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A failed list exports nothing
// (an absent series, not a wrong zero) and is logged.
func (c *RunCollector) Collect(ch chan<- prometheus.Metric) {
	if c.Elected != nil {
		select {
		case <-c.Elected:
		default:
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), runCollectorListDeadline)
	defer cancel()
	var runs taugridv1.TauRunList
	// The summary only reads the runs: the cache's own copies serve, and a
	// scrape at 10,000 runs no longer copies every one (14% of the
	// controller's CPU in the scale profile).
	if err := c.Client.List(ctx, &runs, client.UnsafeDisableDeepCopy); err != nil {
		c.Log.Error(err, "listing TauRuns for metrics")
		return
	}
	s := summarizeRuns(runs.Items, c.Clock.Now())
	for k, n := range s.phases {
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for k, n := range s.failed {
		ch <- prometheus.MustNewConstMetric(attemptsFailedDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for ns, h := range s.waits {
		ch <- prometheus.MustNewConstHistogram(queueWaitDesc, h.count, h.sum, h.buckets, ns)
	}
	for ns, d := range s.oldestQueued {
		ch <- prometheus.MustNewConstMetric(oldestQueuedDesc, prometheus.GaugeValue, d.Seconds(), ns)
	}
	for k, n := range s.gpusIdle {
		ch <- prometheus.MustNewConstMetric(gpusIdleDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}

// runSummary is what the collector exports, computed from the runs.
type runSummary struct {
	phases       map[[2]string]int // namespace, phase
	failed       map[[2]string]int // namespace, failure class
	waits        map[string]*waitHistogram
	oldestQueued map[string]time.Duration
	gpusIdle     map[[2]string]int // namespace, run: running attempts whose GPUs are read
}

type waitHistogram struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64 // cumulative, as Prometheus wants
}

// newWaitHistogram has every bucket, empty ones too: a bucket left out
// would read as no observation at all up to it, and histogram_quantile
// would interpolate from zero.
func newWaitHistogram() *waitHistogram {
	h := &waitHistogram{buckets: make(map[float64]uint64, len(queueWaitBuckets))}
	for _, b := range queueWaitBuckets {
		h.buckets[b] = 0
	}
	return h
}

func (h *waitHistogram) observe(d time.Duration) {
	h.count++
	h.sum += d.Seconds()
	for _, b := range queueWaitBuckets {
		if d.Seconds() <= b {
			h.buckets[b]++
		}
	}
}

// summarizeRuns is the collector's pure part.
func summarizeRuns(runs []taugridv1.TauRun, now time.Time) runSummary {
	s := runSummary{phases: map[[2]string]int{}, failed: map[[2]string]int{},
		waits: map[string]*waitHistogram{}, oldestQueued: map[string]time.Duration{}, gpusIdle: map[[2]string]int{}}
	for i := range runs {
		r := &runs[i]
		ns := r.Namespace
		phase := string(r.Status.Phase)
		if phase == "" {
			phase = string(taugridv1.PhasePending)
		}
		s.phases[[2]string{ns, phase}]++
		for _, a := range r.Status.Attempts {
			if a.FailureClass != "" {
				s.failed[[2]string{ns, a.FailureClass}]++
			}
		}
		for _, d := range queueWaits(r.Status.Phases) {
			h := s.waits[ns]
			if h == nil {
				h = newWaitHistogram()
				s.waits[ns] = h
			}
			h.observe(d)
		}
		if n := len(r.Status.Attempts); r.Status.Phase == taugridv1.PhaseRunning && n > 0 && r.Status.Attempts[n-1].GPUUsage != nil {
			idle := 0
			if u := r.Status.Attempts[n-1].GPUUsage; u.Idle {
				idle = int(u.GPUs)
			}
			s.gpusIdle[[2]string{ns, r.Name}] = idle
		}
		if since, ok := queuedSince(r); ok && now.Sub(since) > s.oldestQueued[ns] {
			s.oldestQueued[ns] = now.Sub(since)
		}
	}
	return s
}

// queueWaits are the waits from entering Queued to the next admission (or
// running, when admission was not recorded), one per admitted attempt.
func queueWaits(phases []taugridv1.PhaseTransition) []time.Duration {
	var out []time.Duration
	var queued *time.Time
	for _, p := range phases {
		switch p.Phase {
		case taugridv1.PhaseQueued:
			t := p.Time.Time
			queued = &t
		case taugridv1.PhaseAdmitted, taugridv1.PhaseRunning:
			if queued != nil {
				out = append(out, p.Time.Sub(*queued))
				queued = nil
			}
		default:
			queued = nil
		}
	}
	return out
}

// queuedSince is when a run now in Queued entered it.
func queuedSince(r *taugridv1.TauRun) (time.Time, bool) {
	if r.Status.Phase != taugridv1.PhaseQueued {
		return time.Time{}, false
	}
	for i := len(r.Status.Phases) - 1; i >= 0; i-- {
		if r.Status.Phases[i].Phase == taugridv1.PhaseQueued {
			return r.Status.Phases[i].Time.Time, true
		}
	}
	return time.Time{}, false
}
