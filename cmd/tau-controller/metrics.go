package main

import (
	"crypto/tls"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics filter's own limits: its reviews go through a client of
// their own at this pace, so that callers with made-up tokens cannot spend
// the rate the reconcilers need (controller-runtime's filter caches answers
// for a minute, but reviews every token it has not seen); and requests
// beyond metricsInFlight at once are answered 429 rather than queued.
const (
	metricsReviewQPS   = 5
	metricsReviewBurst = 10
	metricsInFlight    = 8
)

// metricsOptions serves the metrics over HTTPS (a self-signed certificate:
// Prometheus scrapes with insecureSkipVerify, as kubebuilder's scaffold
// does) to callers the API server vouches for and whose RBAC grants get
// on /metrics (the chart's metrics-reader ClusterRole); every pod of every
// tenant can reach the port. --metrics-secure=false serves plain HTTP to
// anyone, for a controller run on a laptop (hack/scale).
func metricsOptions(o options) metricsserver.Options {
	if !o.metricsSecure {
		return metricsserver.Options{BindAddress: o.metricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.metricsAddr,
		SecureServing:  true,
		FilterProvider: metricsFilter,
		// HTTP/2's rapid reset and stream floods (CVE-2023-44487,
		// CVE-2023-39325) on a port anyone can reach: HTTP/1.1 only, as
		// kubebuilder's scaffold does by default.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}

// metricsFilter is controller-runtime's TokenReview and SubjectAccessReview
// filter, with its reviews paced and its requests bounded.
func metricsFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = metricsReviewQPS, metricsReviewBurst, nil
	authn, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, h http.Handler) (http.Handler, error) {
		guarded, err := authn(log, h)
		if err != nil {
			return nil, err
		}
		return limitInFlight(guarded, metricsInFlight), nil
	}, nil
}

// limitInFlight answers 429 to requests beyond n at once.
func limitInFlight(h http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many metrics requests at once", http.StatusTooManyRequests)
		}
	})
}
