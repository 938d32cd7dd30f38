package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool finds Prometheus's promtool (Debian: apt-get install prometheus).
// Outside CI a machine without it skips; in CI (CI=true) it is a failure,
// as .ci/run installs it.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed; CI must install it (apt-get install --no-install-recommends prometheus)")
		}
		t.Skip("promtool is not installed (apt-get install --no-install-recommends prometheus)")
	}
	return path
}

// ruleGroups writes the chart's PrometheusRule groups as a Prometheus rule
// file and returns them.
func ruleGroups(t *testing.T, dir string) []ruleGroup {
	t.Helper()
	r := render(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}})
	pr := r.Find("PrometheusRule", "taugrid")
	if pr == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	b, err := yaml.Marshal(pr.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var spec struct{ Groups []ruleGroup }
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	return spec.Groups
}

type ruleGroup struct {
	Name  string
	Rules []struct {
		Alert       string
		Expr        string
		Labels      map[string]string
		Annotations map[string]string
	}
}

func (g ruleGroup) annotations(alert string) map[string]string {
	for _, r := range g.Rules {
		if r.Alert == alert {
			return r.Annotations
		}
	}
	return nil
}

func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestTheAlertRulesPassPromtool checks the rules the chart installs.
func TestTheAlertRulesPassPromtool(t *testing.T) {
	dir := t.TempDir()
	ruleGroups(t, dir)
	runPromtool(t, dir, "check", "rules", "rules.yaml")
}

// TestAStuckRunAndADownControllerFireTheirAlerts feeds synthetic series to
// promtool's rule tests: a run queued past the default two hours fires
// TauGridRunStuckQueued for its namespace only, and a controller whose
// scrapes fail fires TauGridControllerDown.
func TestAStuckRunAndADownControllerFireTheirAlerts(t *testing.T) {
	dir := t.TempDir()
	groups := ruleGroups(t, dir)
	stuck := groups[0].annotations("TauGridRunStuckQueued")
	down := groups[0].annotations("TauGridControllerDown")
	tests := map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval": "1m",
			"input_series": []any{
				// team-a's oldest queued run waits on and on: 60 s more per minute.
				map[string]string{"series": `taugrid_run_oldest_queued_seconds{namespace="team-a"}`, "values": "0+60x200"},
				// team-b's queue moves: never more than ten minutes.
				map[string]string{"series": `taugrid_run_oldest_queued_seconds{namespace="team-b"}`, "values": "600x200"},
				map[string]string{"series": `up{job="tau-controller",namespace="taugrid-system"}`, "values": "1x10 0x30"},
			},
			"alert_rule_test": []any{
				map[string]any{"eval_time": "110m", "alertname": "TauGridRunStuckQueued", "exp_alerts": []any{}},
				map[string]any{"eval_time": "130m", "alertname": "TauGridRunStuckQueued", "exp_alerts": []any{map[string]any{
					"exp_labels":      map[string]string{"severity": "warning", "namespace": "team-a"},
					"exp_annotations": withNamespace(stuck, "team-a"),
				}}},
				map[string]any{"eval_time": "5m", "alertname": "TauGridControllerDown", "exp_alerts": []any{}},
				map[string]any{"eval_time": "20m", "alertname": "TauGridControllerDown", "exp_alerts": []any{map[string]any{
					"exp_labels":      map[string]string{"severity": "critical"},
					"exp_annotations": down,
				}}},
			},
		}},
	}
	b, err := yaml.Marshal(tests)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "test", "rules", "tests.yaml")
}

// withNamespace expands $labels.namespace as Prometheus would.
func withNamespace(annotations map[string]string, ns string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		out[k] = strings.ReplaceAll(v, "{{ $labels.namespace }}", ns)
	}
	return out
}
