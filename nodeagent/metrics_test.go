package nodeagent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsAndHealthz scrapes /metrics while the agent runs (without a
// cluster) and checks the per-GPU series and /healthz.
func TestMetricsAndHealthz(t *testing.T) {
	f := newFakeNVML(t)
	reg := prometheus.NewRegistry()
	cfg := testConfig()
	cfg.NodeName = ""
	a, err := New(cfg, Deps{NVML: f, BootID: func() (string, error) { return "b", nil }, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler(reg, trustingGuard(t)))
	t.Cleanup(srv.Close)
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz before the loop started: %d, want 503", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	f.set(func(f *fakeNVML) { f.ecc[2] = 3 })
	f.xid(3, 79)
	want := []string{
		fmt.Sprintf(`taugrid_gpu_temperature_celsius{gpu="0",uuid=%q} 40`, f.uuid(0)),
		fmt.Sprintf(`taugrid_gpu_power_watts{gpu="7",uuid=%q} 320`, f.uuid(7)),
		fmt.Sprintf(`taugrid_gpu_ecc_uncorrected_volatile{gpu="2",uuid=%q} 3`, f.uuid(2)),
		fmt.Sprintf(`taugrid_gpu_xid_events_total{class="fatal",gpu="3",uuid=%q,xid="79"} 1`, f.uuid(3)),
		fmt.Sprintf(`taugrid_gpu_health{gpu="3",uuid=%q} 3`, f.uuid(3)),
		fmt.Sprintf(`taugrid_gpu_health{gpu="0",uuid=%q} 0`, f.uuid(0)),
		`taugrid_gpu_check_status{check="ecc",gpu="2"} 3`,
		`taugrid_nodeagent_nvml_up 1`,
		`taugrid_nodeagent_condition{status="False"} 1`,
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get(t, srv.URL+"/metrics")
		var missing []string
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks:\n%s\n\nit has:\n%s", strings.Join(missing, "\n"), body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while running: %d %s", code, body)
	}
}

// get asks url as a caller the cluster vouches for (trustingGuard's).
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	return request(t, url, "Bearer "+trustedToken)
}
