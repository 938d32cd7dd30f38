package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taugrid/taugrid/gitsource"
)

// MetricWebhookRequests counts webhook deliveries.
const MetricWebhookRequests = "taugrid_webhook_requests_total"

// WebhookMetrics counts webhook deliveries by forge and result.
type WebhookMetrics struct {
	requests *prometheus.CounterVec
}

// NewWebhookMetrics registers taugrid_webhook_requests_total on reg.
func NewWebhookMetrics(reg prometheus.Registerer) (*WebhookMetrics, error) {
	m := &WebhookMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricWebhookRequests,
		Help: "Webhook deliveries by provider (github, gitlab, gitea, unknown) and result (nudged, ignored, " +
			"malformed, unauthorized, unknown_receiver, refused, error).",
	}, []string{"provider", "result"})}
	if err := reg.Register(m.requests); err != nil {
		return nil, err
	}
	return m, nil
}

// Wrap counts each delivery h answers; the result is read from its status
// code, as gitsource.WebhookHandler documents them.
func (m *WebhookMetrics) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.requests.WithLabelValues(webhookProvider(r.Header), webhookResult(sw.status)).Inc()
	})
}

// webhookProvider tells the forge by its event header. Gitea sends GitHub's
// headers too, so it is checked first.
func webhookProvider(h http.Header) string {
	switch {
	case h.Get("X-Gitea-Event") != "" || h.Get("X-Forgejo-Event") != "":
		return string(gitsource.ForgeGitea)
	case h.Get("X-Gitlab-Event") != "":
		return string(gitsource.ForgeGitLab)
	case h.Get("X-GitHub-Event") != "":
		return string(gitsource.ForgeGitHub)
	}
	return "unknown"
}

func webhookResult(status int) string {
	switch status {
	case http.StatusAccepted:
		return "nudged"
	case http.StatusOK:
		return "ignored"
	case http.StatusBadRequest:
		return "malformed"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusNotFound:
		return "unknown_receiver"
	case http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return "refused"
	}
	return "error"
}

// statusWriter remembers the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
