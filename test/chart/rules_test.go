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
	r, err := RenderOn(Namespace, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}, MonitoringAPIs...)
	if err != nil {
		t.Fatal(err)
	}
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

// TestIdleGPUsAndAStarvedClusterQueueFireTheirAlerts: a pod whose GPUs read 2 %
// busy for the default 30 minutes fires TauGridGPUsIdle for that pod only
// (a busy pod beside it does not, nor a free GPU, nor a pod idle for less
// than the 30 minutes); a ClusterQueue with
// workloads pending and no admission for an hour fires
// TauGridClusterQueueStarved, one that admits does not.
func TestIdleGPUsAndAStarvedClusterQueueFireTheirAlerts(t *testing.T) {
	dir := t.TempDir()
	groups := ruleGroups(t, dir)
	idle := groups[0].annotations("TauGridGPUsIdle")
	starved := groups[0].annotations("TauGridClusterQueueStarved")
	runIdle := groups[0].annotations("TauGridRunGPUsIdle")
	util := func(gpu, ns, pod, values string) map[string]string {
		return map[string]string{"values": values, "series": `taugrid_gpu_utilization_ratio{gpu="` + gpu +
			`",uuid="GPU-` + gpu + `",namespace="` + ns + `",pod="` + pod + `",container="main",instance="gpu-1"}`}
	}
	tests := map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval": "1m",
			"input_series": []any{
				// team-a's run: busy for 20 minutes, then its 2 GPUs idle at 2 %.
				util("0", "team-a", "r-1-0-abcde", "0.9x20 0.02x60"),
				util("1", "team-a", "r-1-0-abcde", "0.9x20 0.02x60"),
				// team-b's run stays busy; GPU 3 is free (no pod) and idle.
				util("2", "team-b", "r-2-0-fghij", "0.8x80"),
				util("3", "", "", "0x80"),
				// team-c's run starts at 40 minutes, idle: too recent at 55.
				util("4", "team-c", "r-3-0-klmno", "_x40 0x40"),
				map[string]string{"series": `kueue_pending_workloads{cluster_queue="team-a",status="active"}`, "values": "2x80"},
				map[string]string{"series": `kueue_pending_workloads{cluster_queue="team-b",status="active"}`, "values": "1x80"},
				map[string]string{"series": `kueue_admitted_workloads_total{cluster_queue="team-b"}`, "values": "0+1x80"},
				// The controller judges team-a's run idle at 50 minutes.
				map[string]string{"series": `taugrid_run_gpus_idle{namespace="team-a",run="r-1",instance="ctl"}`, "values": "0x50 2x30"},
				map[string]string{"series": `taugrid_run_gpus_idle{namespace="team-b",run="r-2",instance="ctl"}`, "values": "0x80"},
			},
			"alert_rule_test": []any{
				map[string]any{"eval_time": "45m", "alertname": "TauGridGPUsIdle", "exp_alerts": []any{}},
				map[string]any{"eval_time": "55m", "alertname": "TauGridGPUsIdle", "exp_alerts": []any{map[string]any{
					"exp_labels":      map[string]string{"severity": "warning", "namespace": "team-a", "pod": "r-1-0-abcde"},
					"exp_annotations": expand(idle, map[string]string{"$value": "2", "$labels.namespace": "team-a", "$labels.pod": "r-1-0-abcde"}),
				}}},
				map[string]any{"eval_time": "53m", "alertname": "TauGridRunGPUsIdle", "exp_alerts": []any{}},
				map[string]any{"eval_time": "56m", "alertname": "TauGridRunGPUsIdle", "exp_alerts": []any{map[string]any{
					"exp_labels":      map[string]string{"severity": "warning", "namespace": "team-a", "run": "r-1"},
					"exp_annotations": expand(runIdle, map[string]string{"$value": "2", "$labels.namespace": "team-a", "$labels.run": "r-1"}),
				}}},
				map[string]any{"eval_time": "50m", "alertname": "TauGridClusterQueueStarved", "exp_alerts": []any{}},
				map[string]any{"eval_time": "65m", "alertname": "TauGridClusterQueueStarved", "exp_alerts": []any{map[string]any{
					"exp_labels":      map[string]string{"severity": "warning", "cluster_queue": "team-a"},
					"exp_annotations": expand(starved, map[string]string{"$labels.cluster_queue": "team-a"}),
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

// expand fills in template variables as Prometheus would.
func expand(annotations, vars map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		for name, val := range vars {
			v = strings.ReplaceAll(v, "{{ "+name+" }}", val)
		}
		out[k] = v
	}
	return out
}

// TestWithoutThePrometheusOperatorTheChartInstallsAndSaysWhatItLeftOut is the
// README's install (ServiceMonitors and rules on) on a cluster that does not
// serve monitoring.coreos.com/v1: nothing of that group is rendered, so helm
// install cannot fail with "no matches for kind", and NOTES says so; on a
// cluster that serves it, both are rendered.
func TestWithoutThePrometheusOperatorTheChartInstallsAndSaysWhatItLeftOut(t *testing.T) {
	values := map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}}}
	bare := render(t, values)
	if got := bare.Kinds("ServiceMonitor", "PrometheusRule"); len(got) != 0 {
		t.Errorf("%d monitoring.coreos.com objects rendered for a cluster without the API", len(got))
	}
	if !strings.Contains(bare.Notes, "NOT installed: the ServiceMonitors and the PrometheusRule") {
		t.Errorf("NOTES do not say what was left out:\n%s", bare.Notes)
	}
	with, err := RenderOn(Namespace, values, MonitoringAPIs...)
	if err != nil {
		t.Fatal(err)
	}
	if got := with.Kinds("ServiceMonitor", "PrometheusRule"); len(got) != 3 {
		t.Errorf("%d monitoring objects where the API is served, want 2 ServiceMonitors and a PrometheusRule", len(got))
	}
	if strings.Contains(with.Notes, "NOT installed") || !strings.Contains(with.Notes, "Alert rules are installed") {
		t.Errorf("NOTES where the API is served:\n%s", with.Notes)
	}
}
