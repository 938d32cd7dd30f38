package clusters

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// Metrics counts and times the requests made to each worker cluster.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the worker request metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taugrid_worker_requests_total",
			Help: "Requests to MultiKueue worker clusters' API servers, by cluster, HTTP method and response code.",
		}, []string{"cluster", "code", "method"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "taugrid_worker_request_duration_seconds",
			Help:    "Time to the response headers of requests to worker clusters' API servers.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"cluster"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// wrap instruments the transport of one worker's clients.
func (m *Metrics) wrap(cluster string) func(http.RoundTripper) http.RoundTripper {
	if m == nil {
		return nil
	}
	labels := prometheus.Labels{"cluster": cluster}
	return func(rt http.RoundTripper) http.RoundTripper {
		return promhttp.InstrumentRoundTripperCounter(m.requests.MustCurryWith(labels),
			promhttp.InstrumentRoundTripperDuration(m.duration.MustCurryWith(labels), rt))
	}
}

// Requests is how many requests went to cluster so far, whatever their
// response.
func (m *Metrics) Requests(cluster string) float64 {
	return m.sum(cluster, func(string) bool { return true })
}

// Writes is how many of those wrote (any method but GET), whatever their
// response.
func (m *Metrics) Writes(cluster string) float64 {
	return m.sum(cluster, func(method string) bool { return method != "get" })
}

// sum adds up the requests to cluster whose method counts.
func (m *Metrics) sum(cluster string, counts func(method string) bool) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { m.requests.Collect(ch); close(ch) }()
	var total float64
	for metric := range ch {
		var pb dto.Metric
		if metric.Write(&pb) != nil {
			continue
		}
		l := map[string]string{}
		for _, p := range pb.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["cluster"] == cluster && counts(l["method"]) {
			total += pb.GetCounter().GetValue()
		}
	}
	return total
}
