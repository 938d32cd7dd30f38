package clusters

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Each request is named as the API server's apiserver_request_total names
// it, and a request to no resource is one label, whatever its path.
func TestARequestIsNamedByItsVerbAndResource(t *testing.T) {
	for _, tc := range []struct{ method, url, want string }{
		{"POST", "/apis/batch/v1/namespaces/team-a/jobs", "create jobs.batch"},
		{"PATCH", "/apis/taugrid.dev/v1alpha1/namespaces/team-a/tauruns/r1/status", "patch tauruns.taugrid.dev/status"},
		{"GET", "/apis/batch/v1/namespaces/team-a/jobs/r1-1", "get jobs.batch"},
		{"GET", "/api/v1/namespaces/team-a/events?limit=250", "list events"},
		{"GET", "/api/v1/namespaces/team-a/pods/p-0/log?container=main", "get pods/log"},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=7", "watch pods"},
		{"GET", "/api/v1/nodes", "list nodes"},
		{"GET", "/api/v1/namespaces/team-a", "get namespaces"},
		{"DELETE", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/job-r1-1", "delete workloads.kueue.x-k8s.io"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/taugrid/leases/tau", "update leases.coordination.k8s.io"},
		{"GET", "/apis/taugrid.dev/v1alpha1", "get nonresource"},
		{"GET", "/api/v1", "get nonresource"},
		{"GET", "/version", "get nonresource"},
		{"GET", "/", "get nonresource"},
	} {
		r := httptest.NewRequest(tc.method, tc.url, nil)
		if verb, res := RequestKind(r); verb+" "+res != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.url, verb+" "+res, tc.want)
		}
	}
}

// What a wrapped transport sends is counted by verb, resource and the
// code that came back, or "error" when none did.
func TestTheControllersAPIRequestsAreCountedByWhatTheyAre(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a, err := NewAPIRequests(reg)
	if err != nil {
		t.Fatal(err)
	}
	codes := []int{http.StatusCreated, http.StatusConflict}
	rt := a.Wrap(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodDelete {
			return nil, errors.New("connection refused")
		}
		code := codes[0]
		codes = codes[1:]
		return &http.Response{StatusCode: code, Request: r}, nil
	}))
	for _, m := range []string{http.MethodPost, http.MethodPost, http.MethodDelete} {
		if resp, err := rt.RoundTrip(httptest.NewRequest(m, "/apis/batch/v1/namespaces/a/jobs", nil)); err == nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
	}
	for labels, want := range map[[3]string]float64{
		{"create", "jobs.batch", "201"}:   1,
		{"create", "jobs.batch", "409"}:   1,
		{"delete", "jobs.batch", "error"}: 1,
	} {
		if got := testutil.ToFloat64(a.requests.WithLabelValues(labels[:]...)); got != want {
			t.Errorf("%v: %v, want %v", labels, got, want)
		}
	}
	if n := testutil.CollectAndCount(reg, MetricAPIRequests); n != 3 {
		t.Errorf("%d series, want 3", n)
	}
}
