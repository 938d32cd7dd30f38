package nodeagent

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/taugrid/taugrid/api/gpus"
)

// Limits of the agent's HTTP server, the controller's (server.NewServer):
// every pod of every tenant can open a connection to it, so a client that
// sends its headers a byte at a time, never reads its answer or keeps idle
// connections open is cut off instead of holding a goroutine and a socket.
const (
	ServerReadHeaderTimeout = 10 * time.Second
	ServerReadTimeout       = 30 * time.Second
	ServerWriteTimeout      = 60 * time.Second
	ServerIdleTimeout       = 120 * time.Second
	ServerMaxHeaderBytes    = 64 << 10
)

// NewServer returns the agent's server for addr with the limits above.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		WriteTimeout:      ServerWriteTimeout,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
	}
}

// Handler serves /metrics from g and /gpus (the GPUs' utilisation, by
// holder: UsageReport) to the callers guard admits, and /healthz, from the
// agent's loop heartbeat, to anyone: the kubelet probes it without a token.
func (a *Agent) Handler(g prometheus.Gatherer, guard *Guard) http.Handler {
	if guard == nil {
		panic("nodeagent: Handler needs a Guard for /gpus and /metrics")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard.Require(promhttp.HandlerFor(g, promhttp.HandlerOpts{})))
	mux.Handle("GET "+gpus.Path, guard.Require(http.HandlerFunc(a.serveUsage)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
