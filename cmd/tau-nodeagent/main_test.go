package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/taugrid/taugrid/nodeagent"
)

// TestOnceWithoutADriverPrintsAnUnmonitoredNode is hack/gpu-check.sh, and an
// admin on a node with no cluster access, on a machine without a driver: a
// JSON report saying NVML is unavailable, the verdict Unknown, nothing it
// would taint, and exit 3 (not monitored), with --dry-run or without.
func TestOnceWithoutADriverPrintsAnUnmonitoredNode(t *testing.T) {
	for name, args := range map[string][]string{
		"dry run":                     {"--dry-run"},
		"no cluster configured":       {"--node-name", "gpu-1"},
		"no cluster, no PodResources": {"--pod-resources-socket", "/nonexistent/kubelet.sock"},
	} {
		t.Run(name, func(t *testing.T) { onceWithoutADriver(t, args) })
	}
}

func onceWithoutADriver(t *testing.T, args []string) {
	t.Setenv("NODE_NAME", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "")
	var stdout, stderr strings.Builder
	args = append([]string{"--once", "-o", "json", "--nvml-library", "/nonexistent/libnvidia-ml.so.1"}, args...)
	code := run(context.Background(), args, &stdout, &stderr)
	if code != 3 {
		t.Fatalf("exit %d, want 3 (GPUs not monitored); stderr:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "connecting to the Kubernetes API") {
		t.Errorf("with no cluster configured it tried one:\n%s", stderr.String())
	}
	var report nodeagent.Report
	if err := json.Unmarshal([]byte(stdout.String()), &report); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, stdout.String())
	}
	got := map[string]any{
		"dryRun": report.DryRun, "usable": report.NVML.Usable, "reason": report.NVML.Reason,
		"status": string(report.Verdict.Status), "taint": report.Verdict.Taint,
	}
	want := map[string]any{"dryRun": true, "usable": false, "reason": nodeagent.ReasonNVMLUnavailable, "status": "Unknown", "taint": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFlagsAreChecked(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"a node name is needed to run as a DaemonSet": {args: []string{}, want: "--node-name (or $NODE_NAME) is required"},
		"an XID list must be numbers":                 {args: []string{"--once", "--xid-fatal", "48,lots"}, want: `--xid-fatal: XID "lots" is not a number`},
		"the breaker share is a fraction":             {args: []string{"--once", "--breaker-max-share", "2"}, want: "--breaker-max-share 2: want more than 0, at most 1"},
		"the output is text or json":                  {args: []string{"--once", "-o", "yaml"}, want: `-o "yaml": want text or json`},
		"intervals are positive":                      {args: []string{"--once", "--poll-interval", "0s"}, want: "intervals and timeouts must be positive"},
		"--once with a cluster it cannot reach fails": {args: []string{"--once", "--node-name", "n1", "--kubeconfig", "/nonexistent"}, want: "connecting to the Kubernetes API"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("NODE_NAME", "")
			var stdout, stderr strings.Builder
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure saying %q", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestOnceWithAClusterItCannotReachStillPrintsTheVerdict: the admin sees what
// NVML said, and the exit status says the cycle failed.
func TestOnceWithAClusterItCannotReachStillPrintsTheVerdict(t *testing.T) {
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"--once", "-o", "json", "--node-name", "n1", "--kubeconfig", "/nonexistent",
		"--nvml-library", "/nonexistent/libnvidia-ml.so.1"}, &stdout, &stderr)
	var report nodeagent.Report
	if err := json.Unmarshal([]byte(stdout.String()), &report); err != nil {
		t.Fatalf("no JSON report: %v\n%s", err, stdout.String())
	}
	if code == 0 || report.Verdict.Status != "Unknown" || !report.DryRun {
		t.Errorf("exit %d, verdict %q, dryRun %v; want non-zero, Unknown, reported only", code, report.Verdict.Status, report.DryRun)
	}
}

// TestTheAgentsServerHasTheControllersLimits: any pod can connect to the
// agent's port; one trickling its headers or never reading must not hold a
// socket for ever. (It had only a 5 s header timeout.)
func TestTheAgentsServerHasTheControllersLimits(t *testing.T) {
	srv := setupServer("127.0.0.1:0", http.NotFoundHandler(), logr.Discard())
	defer shutdown(srv)
	got := []any{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes}
	want := []any{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 64 << 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read header, read, write, idle timeouts, max header bytes (-want +got):\n%s", diff)
	}
}
