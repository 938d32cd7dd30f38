package clusters

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricAPIRequests counts the controller's requests to its own cluster's
// API server by what they are.
const MetricAPIRequests = "taugrid_api_requests_total"

// APIRequests counts a client's API requests by verb and resource, as the
// API server's own apiserver_request_total names them ("create
// jobs.batch", "patch tauruns.taugrid.dev/status", "watch pods"), and by
// response code: the API server's count is of every client, client-go's
// (rest_client_requests_total) of no resource. One shared API server is
// what a cluster's controllers compete for; this says what TauGrid's
// share is spent on.
type APIRequests struct {
	requests *prometheus.CounterVec
}

// NewAPIRequests registers MetricAPIRequests with reg.
func NewAPIRequests(reg prometheus.Registerer) (*APIRequests, error) {
	a := &APIRequests{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricAPIRequests,
		Help: "The controller's requests to its cluster's API server, by verb and resource (as apiserver_request_total names them) and response code (\"error\" when none came).",
	}, []string{"verb", "resource", "code"})}
	if err := reg.Register(a.requests); err != nil {
		return nil, err
	}
	return a, nil
}

// Wrap counts what rt sends: a rest.Config's WrapTransport.
func (a *APIRequests) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		verb, resource := RequestKind(r)
		resp, err := rt.RoundTrip(r)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		a.requests.WithLabelValues(verb, resource, code).Inc()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// RequestKind is a request's verb and resource, Kubernetes' way: a GET of
// a collection is a list (a watch with ?watch=true), of one object a get;
// the resource is "jobs.batch" for a group's, "pods" for the core group's,
// with "/status" or "/log" for a subresource. A request to no resource
// (discovery, /version, /healthz) is "nonresource", so that the labels
// stay few whatever is asked.
func RequestKind(r *http.Request) (verb, resource string) {
	verb = map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[r.Method]
	if verb == "" {
		verb = strings.ToLower(r.Method)
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) > 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return verb, "nonresource"
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource = parts[0]
	if group != "" {
		resource += "." + group
	}
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	if r.Method == http.MethodGet {
		switch {
		case r.URL.Query().Get("watch") == "true":
			verb = "watch"
		case len(parts) == 1:
			verb = "list"
		}
	}
	return verb, resource
}
