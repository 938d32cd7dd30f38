package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// bench measures the CLI against the demo's cluster and controller: tau run
// to TauRun created, with the nudge through the API and with the poll
// alone, and tau status through the API and through a kubeconfig.
func (d *demo) bench(ctx context.Context) error {
	const n = 10
	for _, mode := range []struct {
		name string
		env  []string
	}{
		{"tau run, nudged through the API", []string{"TAU_API_URL=" + d.apiURL}},
		{"tau run, poll only (interval 2s)", []string{"TAU_API_URL=", "KUBECONFIG=/nonexistent"}},
	} {
		var took []time.Duration
		for range n {
			start := time.Now()
			out, err := d.tauEnv(ctx, mode.env, "run")
			if err != nil {
				return err
			}
			id := runIDOf(out)
			if err := d.poll(ctx, time.Minute, func() (bool, string, error) {
				var list taugridv1.TauRunList
				err := d.k8s.List(ctx, &list, client.InNamespace("team-a"),
					client.MatchingLabels{taugridv1.LabelRefHash: runs.RefHash(taugridv1.RunRefPrefix + id)})
				return len(list.Items) > 0, "", err
			}); err != nil {
				return err
			}
			took = append(took, time.Since(start))
		}
		report(mode.name+" → TauRun created", took)
	}
	out, err := d.tauEnv(ctx, []string{"TAU_API_URL=" + d.apiURL}, "list", "-o", "json")
	if err != nil {
		return err
	}
	id := ""
	if i := strings.Index(out, `"ref": "refs/tau/runs/`); i >= 0 {
		id = strings.SplitN(out[i+len(`"ref": "refs/tau/runs/`):], `"`, 2)[0]
	}
	for _, mode := range []struct {
		name string
		env  []string
	}{
		{"tau status, through the API", []string{"TAU_API_URL=" + d.apiURL}},
		{"tau status, through a kubeconfig", []string{"TAU_API_URL=", "KUBECONFIG=" + d.cluster.Kubeconfig()}},
	} {
		var took []time.Duration
		for range 20 {
			start := time.Now()
			if _, err := d.tauEnv(ctx, mode.env, "status", id); err != nil {
				return err
			}
			took = append(took, time.Since(start))
		}
		report(mode.name, took)
	}
	return nil
}

func runIDOf(out string) string {
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "r-") {
			return f
		}
	}
	return ""
}

// tauEnv runs tau quietly with extra environment.
func (d *demo) tauEnv(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.tau, append(args, "-n", "team-a")...)
	cmd.Dir = d.research
	cmd.Env = append(append(append(os.Environ(), d.gitEnv...), "TAU_TOKEN="+demoToken, "NO_COLOR=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tau %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func report(name string, ds []time.Duration) {
	slices.Sort(ds)
	fmt.Printf("    %-45s n=%d  p50 %6.0f ms  p90 %6.0f ms  max %6.0f ms\n", name, len(ds),
		ms(ds[len(ds)/2]), ms(ds[len(ds)*9/10]), ms(ds[len(ds)-1]))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
