package gitsource

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are registered on the registry the caller passes, never on the
// global one, so tests and several clients do not collide.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	shared   prometheus.Counter
	bytes    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taugrid_git_requests_total",
			Help: "Git operations against remote repositories, by operation (list, fetch) and result.",
		}, []string{"operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "taugrid_git_request_duration_seconds",
			Help:    "Duration of git operations against remote repositories, retries included.",
			Buckets: []float64{0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300},
		}, []string{"operation"}),
		shared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "taugrid_git_list_shared_total",
			Help: "Ref listings answered by a listing already in flight for the same repository.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "taugrid_git_fetched_bytes_total",
			Help: "Pack bytes received from remote repositories.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.shared, m.bytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(op string, start time.Time, now time.Time, err error) {
	m.requests.WithLabelValues(op, resultLabel(err)).Inc()
	m.duration.WithLabelValues(op).Observe(now.Sub(start).Seconds())
}

// resultLabel is a short, bounded label value for an error's kind.
func resultLabel(err error) string {
	if err == nil {
		return "ok"
	}
	for _, r := range []struct {
		kind  error
		label string
	}{
		{ErrAuth, "auth"}, {ErrNotFound, "not_found"}, {ErrRefMoved, "ref_moved"}, {ErrTooLarge, "too_large"},
		{ErrUnreachable, "unreachable"}, {ErrTimeout, "timeout"}, {ErrServer, "server_error"},
		{ErrTLS, "tls"}, {ErrHostKey, "host_key"}, {ErrUnsupported, "unsupported"},
		{ErrCorrupt, "corrupt"}, {ErrCanceled, "canceled"},
	} {
		if errors.Is(err, r.kind) {
			return r.label
		}
	}
	return "error"
}
