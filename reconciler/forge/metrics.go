package forge

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts forge API calls by forge and result.
type Metrics struct {
	calls *prometheus.CounterVec
}

// NewMetrics registers the forge metrics on reg (the controller's
// registry in production).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{calls: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taugrid_forge_status_calls_total",
		Help: "Commit status API calls by forge and result (ok, rate_limited, rejected, error).",
	}, []string{"forge", "result"})}
	if err := reg.Register(m.calls); err != nil {
		return nil, err
	}
	return m, nil
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
