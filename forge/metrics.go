package forge

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts forge API calls by forge and result, and keeps the rate
// limit quota the forge last reported.
type Metrics struct {
	calls     *prometheus.CounterVec
	remaining *prometheus.GaugeVec
}

// NewMetrics registers the forge metrics on reg (the controller's
// registry in production).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{calls: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taugrid_forge_status_calls_total",
		Help: "Commit status API calls by forge and result (ok, rate_limited, rejected, error).",
	}, []string{"forge", "result"}),
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "taugrid_forge_rate_limit_remaining",
			Help: "Requests left in the forge's rate limit window, as its last answer reported (X-RateLimit-Remaining).",
		}, []string{"forge"})}
	for _, c := range []prometheus.Collector{m.calls, m.remaining} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// quota records the remaining requests a forge's response reports.
func (m *Metrics) quota(f Type, h http.Header) {
	if m == nil || h == nil {
		return
	}
	for _, k := range []string{"X-RateLimit-Remaining", "RateLimit-Remaining"} {
		if n, err := strconv.Atoi(h.Get(k)); err == nil {
			m.remaining.WithLabelValues(string(f)).Set(float64(n))
			return
		}
	}
}

// observe counts one call that ended in err.
func (m *Metrics) observe(f Type, err error) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(string(f), result(err)).Inc()
}

func result(err error) string {
	var we *WaitError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &we):
		return "rate_limited"
	case IsTerminal(err):
		return "rejected"
	}
	return "error"
}

// Remaining is the gauge of a forge's remaining rate-limit quota.
func (m *Metrics) Remaining(f Type) prometheus.Gauge {
	return m.remaining.WithLabelValues(string(f))
}
