package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taugrid/taugrid/nodeagent"
)

// TestOnceDryRunWithoutADriverPrintsAnUnmonitoredNode is hack/gpu-check.sh on a
// machine without a driver: exit 0, a JSON report saying NVML is unavailable,
// nothing it would taint.
func TestOnceDryRunWithoutADriverPrintsAnUnmonitoredNode(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"--once", "-o", "json", "--dry-run", "--nvml-library", "/nonexistent/libnvidia-ml.so.1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
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
		"--once without --dry-run needs a cluster":    {args: []string{"--once", "--node-name", "n1", "--kubeconfig", "/nonexistent"}, want: "connecting to the Kubernetes API"},
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
