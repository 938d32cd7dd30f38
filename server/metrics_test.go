package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWebhookMetricsCountByProviderAndResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewWebhookMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Status") == "401" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	for _, hdr := range []map[string]string{
		{"X-GitHub-Event": "push"},
		{"X-GitHub-Event": "push", "X-Gitea-Event": "push"},
		{"X-Gitlab-Event": "Push Hook", "X-Test-Status": "401"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/hooks/x", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	want := map[[2]string]float64{{"gitea", "nudged"}: 1, {"github", "nudged"}: 1, {"gitlab", "unauthorized"}: 1}
	for k, n := range want {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(k[0], k[1])); got != n {
			t.Errorf("%v: %v, want %v", k, got, n)
		}
	}
	if n := testutil.CollectAndCount(m.requests); n != len(want) {
		t.Errorf("%d series, want %d", n, len(want))
	}
}
