package integration

import (
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/taugrid/taugrid/api/gpus"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/nodeagent"
	"github.com/taugrid/taugrid/test/chart"
)

// TestTheNodeAgentAnswersOnlyWhomTheClusterVouchesFor serves the real node
// agent's handler, its Guard asking this API server's TokenReview and
// SubjectAccessReview under the chart's tau-nodeagent ServiceAccount, and
// calls it with real ServiceAccount tokens from the TokenRequest API. A
// tenant's ServiceAccount (team-b/attacker) is refused /gpus and /metrics,
// even with a token for the agents' audience; so are a run pod's source
// token replayed, a token of a deleted ServiceAccount and no token. The
// controller's ServiceAccount, bound to the chart's ClusterRole, reads
// /gpus with its token for the agents' audience (gpus.Audience), which the
// API server itself refuses, and nothing with its token for the API
// server; Prometheus's, bound by metrics.readers to the chart's
// metrics-reader ClusterRole, reads /metrics and not /gpus. Before the
// Guard, every call got 200.
func TestTheNodeAgentAnswersOnlyWhomTheClusterVouchesFor(t *testing.T) {
	integration(t)
	ctx := context.Background()
	controllerCfg := installChartRBAC(t)
	installChartAgentRBAC(t)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	tokens := map[string]string{
		"controller":          serviceAccountToken(t, admin, chart.Namespace, "tau-controller", gpus.Audience),
		"controller, for API": serviceAccountToken(t, admin, chart.Namespace, "tau-controller"),
		"prometheus":          serviceAccountToken(t, admin, "monitoring", "prometheus"),
		"attacker":            serviceAccountToken(t, admin, "team-b", "attacker"),
		"attacker, for agents": serviceAccountToken(t, admin, "team-b", "attacker", // a pod may project its own for any audience
			gpus.Audience),
		"deleted": serviceAccountToken(t, admin, "team-b", "gone"),
		"source": serviceAccountToken(t, admin, "team-b", "attacker", // what a run pod's fetch init container holds
			"taugrid.dev/source"),
	}
	if err := admin.CoreV1().ServiceAccounts("team-b").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server itself takes the controller's token for the agents
	// from no one: whoever holds it cannot act as the controller.
	asController := rest.AnonymousClientConfig(env.Config)
	asController.BearerToken = tokens["controller"]
	if _, err := kubernetes.NewForConfigOrDie(asController).CoreV1().Pods(chart.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("the API server, asked with the controller's token for the agents: %v, want 401", err)
	}
	srv := guardedAgent(t, "na-gpu-1")

	cases := map[string]struct {
		path, token string
		code        int
		says        string
	}{
		"no token":                                  {path: gpus.Path, code: 401, says: "needs a ServiceAccount token"},
		"a made-up token":                           {path: gpus.Path, token: "made-up", code: 401, says: "does not vouch"},
		"a run pod's source token, replayed":        {path: gpus.Path, token: tokens["source"], code: 401, says: "does not vouch"},
		"a token of a deleted ServiceAccount":       {path: gpus.Path, token: tokens["deleted"], code: 401, says: "does not vouch"},
		"a tenant's ServiceAccount":                 {path: gpus.Path, token: tokens["attacker"], code: 401, says: "for audience " + gpus.Audience},
		"a tenant's ServiceAccount, metrics":        {path: "/metrics", token: tokens["attacker"], code: 403, says: "may not get /metrics"},
		"a tenant's ServiceAccount, its own slice":  {path: gpus.Path + "?namespace=team-b", token: tokens["attacker, for agents"], code: 403, says: "may not get /gpus"},
		"a tenant's token for the agents":           {path: gpus.Path, token: tokens["attacker, for agents"], code: 403, says: `"system:serviceaccount:team-b:attacker" may not get /gpus`},
		"Prometheus on /gpus":                       {path: gpus.Path, token: tokens["prometheus"], code: 401, says: "for audience " + gpus.Audience},
		"the controller's token for the API server": {path: gpus.Path, token: tokens["controller, for API"], code: 401, says: "for audience " + gpus.Audience},
		"the controller on /metrics":                {path: "/metrics", token: tokens["controller, for API"], code: 403, says: "may not get /metrics"},
		"the controller's agents token on /metrics": {path: "/metrics", token: tokens["controller"], code: 401, says: "does not vouch"},
		"the controller":                            {path: gpus.Path, token: tokens["controller"], code: 200, says: `"node":"na-gpu-1"`},
		"Prometheus":                                {path: "/metrics", token: tokens["prometheus"], code: 200, says: "taugrid_nodeagent_nvml_up"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, b := getWithToken(t, srv.URL+tc.path, tc.token) // source_test.go's
			code, body := got.StatusCode, string(b)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Errorf("%d %q, want %d saying %q", code, body, tc.code, tc.says)
			}
			if tc.code != 200 && (strings.Contains(body, "na-gpu-1") || strings.Contains(body, "taugrid_")) {
				t.Errorf("refused, yet served: %s", body)
			}
			if tc.token != "" && strings.Contains(body, tc.token) {
				t.Error("the answer echoes the token")
			}
		})
	}

	t.Run("the controller's reader, with and without its token", func(t *testing.T) {
		addr := agentPodAt(t, "na-system", "na-gpu-1", "10.77.0.9")
		hc, _ := routedTo(addr, srv)
		// The agents found as cmd/tau-controller finds them: its cache of
		// the agents' pods, under the chart's RBAC for the controller.
		agents := &runctrl.NodeAgents{Reader: agentPods(t, controllerCfg, "na-system", "na-gpu-1"), Namespace: "na-system", HTTP: hc,
			Token: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tokens["controller"]})}
		if reps, unread := agents.Reports(ctx, "team-a", []string{"na-gpu-1"}); reps["na-gpu-1"] == nil || len(unread) != 0 {
			t.Errorf("with the controller's token: reports %v, unread %v; want na-gpu-1's report", reps, unread)
		}
		agents.Token = nil
		if reps, unread := agents.Reports(ctx, "team-a", []string{"na-gpu-1"}); len(reps) != 0 || len(unread) != 1 {
			t.Errorf("with no token: reports %v, unread %v; want none read", reps, unread)
		}
	})
}

// installChartAgentRBAC creates the node agent's ServiceAccount, ClusterRole
// and binding, and the metrics-reader ClusterRole bound to
// monitoring/prometheus, as the chart renders them with metrics.readers.
func installChartAgentRBAC(t *testing.T) {
	t.Helper()
	r, err := chart.Render(chart.Namespace, map[string]any{"metrics": map[string]any{"readers": []any{
		map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, u := range r.Kinds("ServiceAccount", "ClusterRole", "ClusterRoleBinding") {
		if name := u.GetName(); name != "tau-nodeagent" && name != "taugrid-metrics-reader" {
			continue
		}
		if err := k8s.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("the chart renders %d of the node agent's 3 RBAC objects and the metrics reader's 2", n)
	}
}

// serviceAccountToken creates the ServiceAccount if need be and returns a
// token of it from the TokenRequest API, for audiences (none: the API
// server's own, as in a pod's default token).
func serviceAccountToken(t *testing.T, c kubernetes.Interface, ns, name string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// guardedAgent serves a node agent's handler for node (NVML: go-nvml's
// simulated H200 server, not polled), its Guard reviewing as the chart's
// tau-nodeagent ServiceAccount.
func guardedAgent(t *testing.T, node string) *httptest.Server {
	t.Helper()
	cfg := nodeagent.DefaultConfig()
	cfg.NodeName = node
	reg := prometheus.NewRegistry()
	agent, err := nodeagent.New(cfg, nodeagent.Deps{NVML: dgxh200.New(), Registry: reg, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	as := rest.CopyConfig(env.Config)
	as.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + chart.Namespace + ":tau-nodeagent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + chart.Namespace, "system:authenticated"},
	}
	// Each case is a token the agent has not seen: more than the
	// default burst of reviews (its bound is nodeagent's own tests').
	gc := nodeagent.DefaultGuardConfig()
	gc.ReviewBurst = 32
	guard := nodeagent.NewGuard(kubernetes.NewForConfigOrDie(as), gc, nil, nil)
	srv := httptest.NewServer(agent.Handler(reg, guard))
	t.Cleanup(srv.Close)
	return srv
}

// agentPodAt is a running tau-nodeagent pod on node with ip, as the kubelet
// would report it (no kubelet here: its status is written directly); it
// returns the address the controller will dial.
func agentPodAt(t *testing.T, ns, node, ip string) string {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tau-nodeagent-" + node, Namespace: ns, Labels: map[string]string{runctrl.NodeAgentLabel: runctrl.NodeAgentName}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "tau-nodeagent", Image: "ghcr.io/taugrid/tau-nodeagent:test",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}}}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(ip, "8080")
}
