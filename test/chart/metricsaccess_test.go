package chart

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/api/gpus"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// TestOnlyTheControllerAndPrometheusReachTheNodeAgents: a tenant's pod on
// the pod network cannot even connect to an agent's port, which serves
// /gpus (the pods of every namespace holding the node's GPUs) and
// /metrics; the controller's pods and the configured Prometheus can. The
// chart used to render no policy for the agents at all.
func TestOnlyTheControllerAndPrometheusReachTheNodeAgents(t *testing.T) {
	r := render(t, nil)
	np := convert[networkingv1.NetworkPolicy](t, r.Find("NetworkPolicy", "tau-nodeagent"))
	if got := np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]; got != "tau-nodeagent" {
		t.Errorf("the policy selects %q pods, want tau-nodeagent", got)
	}
	if diff := cmp.Diff([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes); diff != "" {
		t.Errorf("policy types (-want +got):\n%s", diff)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "metrics" {
		t.Fatalf("ingress %+v, want one rule for the metrics port", np.Spec.Ingress)
	}
	want := []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "tau-controller", "app.kubernetes.io/instance": "taugrid"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}}},
	}
	if diff := cmp.Diff(want, np.Spec.Ingress[0].From); diff != "" {
		t.Errorf("who may reach the agents (-want +got):\n%s", diff)
	}

	own := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "observability"}}}}
	moved := render(t, map[string]any{"networkPolicy": map[string]any{"nodeAgentMetricsFrom": own}})
	from := convert[networkingv1.NetworkPolicy](t, moved.Find("NetworkPolicy", "tau-nodeagent")).Spec.Ingress[0].From
	if len(from) != 2 || from[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "observability" {
		t.Errorf("networkPolicy.nodeAgentMetricsFrom did not replace Prometheus's peer: %+v", from)
	}
	only := render(t, map[string]any{"networkPolicy": map[string]any{"nodeAgentMetricsFrom": []any{}}})
	if from := convert[networkingv1.NetworkPolicy](t, only.Find("NetworkPolicy", "tau-nodeagent")).Spec.Ingress[0].From; len(from) != 1 {
		t.Errorf("with no peers configured, %d peers, want the controller's alone (an empty from would admit anyone)", len(from))
	}
}

// TestTheRBACOfMetricsAndGPUs: the controller may get /gpus (and no more
// of the agents); reading /metrics takes the metrics-reader ClusterRole,
// which metrics.readers binds; the agent and the controller may review
// the tokens they are shown.
func TestTheRBACOfMetricsAndGPUs(t *testing.T) {
	r := render(t, map[string]any{"metrics": map[string]any{"readers": []any{
		map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
		map[string]any{"kind": "Group", "name": "sre"},
	}}})
	controller := convert[rbacv1.ClusterRole](t, r.Find("ClusterRole", "tau-controller")).Rules
	agent := convert[rbacv1.ClusterRole](t, r.Find("ClusterRole", "tau-nodeagent")).Rules
	reader := convert[rbacv1.ClusterRole](t, r.Find("ClusterRole", "taugrid-metrics-reader")).Rules
	got := map[string]bool{
		"controller gets /gpus":           grants(controller, "", "", "/gpus", "get"),
		"controller gets /metrics":        grants(controller, "", "", "/metrics", "get"),
		"controller reviews tokens":       grants(controller, "authentication.k8s.io", "tokenreviews", "", "create"),
		"controller reviews access":       grants(controller, "authorization.k8s.io", "subjectaccessreviews", "", "create"),
		"agent reviews tokens":            grants(agent, "authentication.k8s.io", "tokenreviews", "", "create"),
		"agent reviews access":            grants(agent, "authorization.k8s.io", "subjectaccessreviews", "", "create"),
		"agent gets /gpus":                grants(agent, "", "", "/gpus", "get"),
		"the metrics reader gets /metric": grants(reader, "", "", "/metrics", "get"),
		"the metrics reader gets /gpus":   grants(reader, "", "", "/gpus", "get"),
	}
	want := map[string]bool{
		"controller gets /gpus": true, "controller gets /metrics": false,
		"controller reviews tokens": true, "controller reviews access": true,
		"agent reviews tokens": true, "agent reviews access": true, "agent gets /gpus": false,
		"the metrics reader gets /metric": true, "the metrics reader gets /gpus": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(reader) != 1 {
		t.Errorf("the metrics reader has %d rules, want its one: %+v", len(reader), reader)
	}
	b := convert[rbacv1.ClusterRoleBinding](t, r.Find("ClusterRoleBinding", "taugrid-metrics-reader"))
	wantSubjects := []rbacv1.Subject{
		{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"},
		{Kind: "Group", Name: "sre", APIGroup: "rbac.authorization.k8s.io"},
	}
	if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" || b.RoleRef.Name != "taugrid-metrics-reader" {
		t.Errorf("binding of %s to (-want +got):\n%s", b.RoleRef.Name, diff)
	}
	if strings.Contains(r.Notes, "Bind it to Prometheus") || !strings.Contains(r.Notes, "Bound to: ServiceAccount monitoring/prometheus-k8s, Group sre.") {
		t.Errorf("NOTES do not say who reads the metrics:\n%s", r.Notes)
	}
	bare := render(t, nil)
	if bare.Find("ClusterRoleBinding", "taugrid-metrics-reader") != nil {
		t.Error("a binding of the metrics reader with no readers configured")
	}
	if !strings.Contains(bare.Notes, "--clusterrole=taugrid-metrics-reader") {
		t.Errorf("NOTES do not say how to let Prometheus in:\n%s", bare.Notes)
	}
}

// grants says whether one of rules allows verb on the resource (group,
// resource) or the non-resource URL.
func grants(rules []rbacv1.PolicyRule, group, resource, url, verb string) bool {
	for _, r := range rules {
		if !slices.Contains(r.Verbs, verb) && !slices.Contains(r.Verbs, "*") {
			continue
		}
		if url != "" && slices.Contains(r.NonResourceURLs, url) {
			return true
		}
		if resource != "" && slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
			return true
		}
	}
	return false
}

// TestPrometheusScrapesWithItsTokenAndTheControllerOverHTTPS: the
// ServiceMonitors send Prometheus's ServiceAccount token, the controller's
// only over TLS (its certificate is self-signed: not verified).
func TestPrometheusScrapesWithItsTokenAndTheControllerOverHTTPS(t *testing.T) {
	r, err := RenderOn(Namespace, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}, MonitoringAPIs...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, name := range []string{"tau-controller", "tau-nodeagent"} {
		sm := r.Find("ServiceMonitor", name)
		if sm == nil {
			t.Fatalf("no ServiceMonitor %s", name)
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("%s: %d endpoints, want 1", name, len(eps))
		}
		ep := eps[0].(map[string]any)
		token, _, _ := unstructured.NestedString(ep, "bearerTokenFile")
		scheme, _, _ := unstructured.NestedString(ep, "scheme")
		skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
		got[name] = strings.Join([]string{token, scheme, boolString(skip)}, " ")
	}
	const token = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	want := map[string]string{"tau-controller": token + " https true", "tau-nodeagent": token + "  false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bearer token file, scheme, insecureSkipVerify (-want +got):\n%s", diff)
	}
}

// TestThePlatformTeamIsToldHowToPrintTheAttestationKey: NOTES gives the
// one kubectl command that prints the public key auditors verify with,
// and the controller may read and create that Secret in its namespace.
func TestThePlatformTeamIsToldHowToPrintTheAttestationKey(t *testing.T) {
	r := render(t, nil)
	want := `kubectl -n ` + Namespace + ` get secret tau-attestation-key -o go-template='{{index .data "cosign.pub" | base64decode}}'`
	if !strings.Contains(r.Notes, want) {
		t.Errorf("NOTES lack %s:\n%s", want, r.Notes)
	}
	role := convert[rbacv1.Role](t, r.Find("Role", "tau-controller"))
	for _, verb := range []string{"get", "create"} {
		if !grants(role.Rules, "", "secrets", "", verb) {
			t.Errorf("the controller's Role in %s does not grant %s on secrets", role.Namespace, verb)
		}
	}
}

// TestTheControllerReadsTheAgentsWithATokenForThemAlone: with the node
// agents on, the controller's pod holds a ServiceAccount token for the
// agents' audience (gpus.Audience), which the API server takes from no
// one, where --node-agent-token-file reads it by default, rotated by the
// kubelet; with them off, none.
func TestTheControllerReadsTheAgentsWithATokenForThemAlone(t *testing.T) {
	d := convert[appsv1.Deployment](t, render(t, nil).Find("Deployment", "tau-controller"))
	var got []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if tok := src.ServiceAccountToken; tok != nil {
				got = append(got, fmt.Sprintf("%s: %s, %ds, %s", v.Name, tok.Audience, ptr.Deref(tok.ExpirationSeconds, 0), tok.Path))
			}
		}
	}
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == "node-agent-token" {
			got = append(got, fmt.Sprintf("mounted at %s, read-only %v", path.Join(m.MountPath, "token"), m.ReadOnly))
		}
	}
	want := []string{"node-agent-token: " + gpus.Audience + ", 3600s, token", "mounted at " + runctrl.NodeAgentTokenFile + ", read-only true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the controller's token for the agents (-want +got):\n%s", diff)
	}

	off := convert[appsv1.Deployment](t, render(t, map[string]any{"nodeAgent": map[string]any{"enabled": false}}).Find("Deployment", "tau-controller"))
	for _, v := range off.Spec.Template.Spec.Volumes {
		if v.Name == "node-agent-token" {
			t.Error("with the node agents off, the controller still holds a token for them")
		}
	}
}
