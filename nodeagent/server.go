package nodeagent

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/taugrid/taugrid/api/gpus"
)

// Handler serves /metrics from g and /gpus (the GPUs' utilisation, by
// holder: UsageReport) to the callers guard admits, and /healthz, from the
// agent's loop heartbeat, to anyone: the kubelet probes it without a token.
// /metrics takes a token for the API server (Prometheus's own); /gpus only
// one for gpus.Audience (the controller's for the agents).
func (a *Agent) Handler(g prometheus.Gatherer, guard *Guard) http.Handler {
	if guard == nil {
		panic("nodeagent: Handler needs a Guard for /gpus and /metrics")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard.Require("", promhttp.HandlerFor(g, promhttp.HandlerOpts{})))
	mux.Handle("GET "+gpus.Path, guard.Require(gpus.Audience, http.HandlerFunc(a.serveUsage)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
