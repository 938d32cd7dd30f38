package chart

import (
	"fmt"

	"encoding/json"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// valueSets are the values the render and dry-run tests install with: the
// defaults, every option on, and the README's install command.
func valueSets() map[string]map[string]any {
	return map[string]map[string]any{
		"defaults":          nil,
		"every option on":   everyOptionOn(),
		"the README's":      readmeValues(),
		"no node agent":     {"nodeAgent": map[string]any{"enabled": false}, "networkPolicy": map[string]any{"enabled": false}},
		"evidence on a pvc": {"evidence": map[string]any{"enabled": true}, "ingress": map[string]any{"enabled": true, "host": "tau.example.com"}},
	}
}

func everyOptionOn() map[string]any {
	return mustYAML(`
controller:
  image: {digest: "sha256:` + strings.Repeat("a", 64) + `"}
  replicas: 3
  logLevel: debug
  cache: {type: pvc, pvc: {size: 100Gi, storageClassName: fast}}
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  tolerations: [{key: dedicated, operator: Equal, value: platform, effect: NoSchedule}]
  podAnnotations: {example.com/team: platform}
  multiKueueNamespace: kueue-system
  workers: {runs: 64, repositories: 24, forge: 12}
  forge: {rate: 4, burst: 40}
  memoryLimitRatio: 0.8
  extraArgs: ["--kube-api-qps=50"]
fetchImage: {tag: v0.2.0}
nodeAgent:
  image: {tag: v0.1.1, pullPolicy: Always}
  nodeSelector: {}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H200]}]
  runtimeClassName: ""
  extraArgs: ["--expected-gpus=8"]
evidence:
  enabled: true
  storage:
    type: s3
    s3: {endpoint: "https://s3.example.com", bucket: tau-evidence, region: eu-west-1, existingSecret: evidence-s3}
platform: {create: true, url: "https://git.example.com/platform.git", ref: v3, path: policy, existingSecret: platform-git, webhookSecret: platform-hook, forge: {type: gitea, apiURL: "https://git.example.com", existingSecret: platform-forge}}
ingress: {enabled: true, className: nginx, host: tau.example.com, tls: {secretName: tau-tls}, annotations: {example.com/x: "y"}, trustedProxies: [10.0.0.0/8, "fd00::/8"]}
admissionPolicy: {exceptGroups: [platform-admins]}
networkPolicy: {webhookFrom: [{ipBlock: {cidr: 140.82.112.0/20}}]}
metrics:
  readers: [{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}, {kind: Group, name: sre}]
  serviceMonitor: {enabled: true, interval: 15s, labels: {release: prometheus}}
  prometheusRule: {enabled: true, labels: {release: prometheus}, stuckQueuedSeconds: 3600}
  dashboards: {enabled: true}
`)
}

func mustYAML(s string) map[string]any {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	return m
}

func render(t *testing.T, values map[string]any) *Rendered {
	t.Helper()
	r, err := Render(Namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatal("not rendered")
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatal(err)
	}
	return out
}

func arg(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// TestTheDefaultControllerIsLeaderElectedProbedAndLockedDown checks what
// the controller relies on from its Deployment.
func TestTheDefaultControllerIsLeaderElectedProbedAndLockedDown(t *testing.T) {
	r := render(t, nil)
	d := convert[appsv1.Deployment](t, r.Find("Deployment", "tau-controller"))
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	got := map[string]string{
		"leader-elect":   arg(c.Args, "--leader-elect"),
		"source-url":     arg(c.Args, "--source-url"),
		"namespace":      arg(c.Args, "--namespace"),
		"fetch-image":    arg(c.Args, "--fetch-image"),
		"image":          c.Image,
		"liveness":       c.LivenessProbe.HTTPGet.Path + " " + c.LivenessProbe.HTTPGet.Port.String(),
		"readiness":      c.ReadinessProbe.HTTPGet.Path + " " + c.ReadinessProbe.HTTPGet.Port.String(),
		"runAsNonRoot":   boolString(sc.RunAsNonRoot != nil && *sc.RunAsNonRoot),
		"readOnlyRoot":   boolString(sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem),
		"noEscalation":   boolString(sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation),
		"capabilities":   strings.Join(capabilities(sc.Capabilities), ","),
		"seccomp":        string(sc.SeccompProfile.Type),
		"cache":          volumeKind(pod.Volumes, "cache"),
		"serviceAccount": pod.ServiceAccountName,
		"memory limit":   c.Resources.Limits.Memory().String(),
	}
	want := map[string]string{
		"leader-elect": "true", "source-url": "http://tau-controller.taugrid-system.svc:9090", "namespace": Namespace,
		"fetch-image": "ghcr.io/taugrid/tau:v0.1.0", "image": "ghcr.io/taugrid/tau-controller:v0.1.0",
		"liveness": "/healthz health", "readiness": "/readyz health", "runAsNonRoot": "true", "readOnlyRoot": "true",
		"noEscalation": "true", "capabilities": "ALL", "seccomp": "RuntimeDefault", "cache": "emptyDir",
		"serviceAccount": "tau-controller", "memory limit": "1Gi",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("controller Deployment (-want +got):\n%s", diff)
	}
	if a := arg(c.Args, "--multikueue-namespace"); a != "" {
		t.Errorf("one cluster by default, yet --multikueue-namespace=%s", a)
	}
	if port := containerPort(c.Ports, "health"); port != 8081 {
		t.Errorf("health port %d, want 8081", port)
	}
	svc := convert[corev1.Service](t, r.Find("Service", "tau-controller"))
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name+":"+p.TargetPort.String())
	}
	if want := []string{"metrics:metrics", "source:source", "webhook:webhook", "api:api"}; !slices.Equal(want, ports) {
		t.Errorf("Service ports %v, want %v (evidence only when enabled)", ports, want)
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func capabilities(c *corev1.Capabilities) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, d := range c.Drop {
		out = append(out, string(d))
	}
	return out
}

func volumeKind(vs []corev1.Volume, name string) string {
	for _, v := range vs {
		if v.Name == name {
			switch {
			case v.EmptyDir != nil:
				return "emptyDir"
			case v.PersistentVolumeClaim != nil:
				return "pvc:" + v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	return ""
}

func containerPort(ps []corev1.ContainerPort, name string) int32 {
	for _, p := range ps {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// TestTheChartGrantsTheGeneratedRules: the controller's ClusterRole and Role
// are files/rbac/role.yaml's, which controller-gen writes from the
// reconcilers' markers, and the node agent's are nodeagent/deploy's.
func TestTheChartGrantsTheGeneratedRules(t *testing.T) {
	r := render(t, nil)
	generated := readObjects(t, filepath.Join(Dir(), "files", "rbac", "role.yaml"))
	agent := readObjects(t, filepath.Join("..", "..", "nodeagent", "deploy", "rbac.yaml"))
	for _, tc := range []struct {
		kind, name string
		want       *unstructured.Unstructured
	}{
		{"ClusterRole", "tau-controller", findKind(generated, "ClusterRole")},
		{"Role", "tau-controller", findKind(generated, "Role")},
		{"ClusterRole", "tau-nodeagent", findKind(agent, "ClusterRole")},
	} {
		got := convert[rbacv1.ClusterRole](t, r.Find(tc.kind, tc.name))
		want := convert[rbacv1.ClusterRole](t, tc.want)
		if diff := cmp.Diff(want.Rules, got.Rules); diff != "" {
			t.Errorf("%s %s rules (-generated +chart):\n%s", tc.kind, tc.name, diff)
		}
	}
	role := r.Find("Role", "tau-controller")
	if role.GetNamespace() != Namespace {
		t.Errorf("the leader election Role is in %q, want the release namespace", role.GetNamespace())
	}
}

// TestTheControllerReadsSecretsOnlyWhereItIsBound: no role of the
// controller's grants Secrets beyond its own namespace (and Kueue's, for a
// MultiKueue manager); in tenant namespaces it reads them through the role
// its --tenant-secrets-role names, which it may bind and nothing else.
func TestTheControllerReadsSecretsOnlyWhereItIsBound(t *testing.T) {
	r := render(t, everyOptionOn())
	d := convert[appsv1.Deployment](t, r.Find("Deployment", "tau-controller"))
	args := d.Spec.Template.Spec.Containers[0].Args
	role, sa := arg(args, "--tenant-secrets-role"), arg(args, "--service-account")
	if sa != d.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("--service-account=%s, but the controller runs as %s", sa, d.Spec.Template.Spec.ServiceAccountName)
	}
	grant := convert[rbacv1.ClusterRole](t, r.Find("ClusterRole", role))
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
	if diff := cmp.Diff(want, grant.Rules); diff != "" {
		t.Errorf("ClusterRole %s (-want +got):\n%s", role, diff)
	}
	cr := convert[rbacv1.ClusterRole](t, r.Find("ClusterRole", "tau-controller"))
	for _, rule := range cr.Rules {
		if slices.Contains(rule.Resources, "secrets") {
			t.Errorf("the controller's ClusterRole grants %v on Secrets in every namespace", rule.Verbs)
		}
		if slices.Contains(rule.Resources, "clusterroles") && !cmp.Equal(rule.ResourceNames, []string{role}) {
			t.Errorf("the controller may bind %v, want only %s", rule.ResourceNames, role)
		}
	}
	mk := r.Find("Role", "tau-controller-multikueue")
	if mk == nil || mk.GetNamespace() != "kueue-system" {
		t.Fatalf("no Role for the workers' kubeconfig Secrets in kueue-system: %v", mk)
	}
	if render(t, nil).Find("Role", "tau-controller-multikueue") != nil {
		t.Error("a single-cluster install grants Secrets in Kueue's namespace")
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(path, string(b))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func findKind(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind {
			return u
		}
	}
	return nil
}

// TestTheNodeAgentRunsOnGPUNodesUnderItsOwnAdmissionPolicy: the DaemonSet
// selects the configured GPU nodes and the policy names this release's
// service account; the rest of the policy is nodeagent/deploy's, unchanged.
func TestTheNodeAgentRunsOnGPUNodesUnderItsOwnAdmissionPolicy(t *testing.T) {
	r := render(t, map[string]any{})
	ds := convert[appsv1.DaemonSet](t, r.Find("DaemonSet", "tau-nodeagent"))
	if got := ds.Spec.Template.Spec.NodeSelector; !cmp.Equal(map[string]string{"nvidia.com/gpu.present": "true"}, got) {
		t.Errorf("nodeSelector %v", got)
	}
	vap := r.Find("ValidatingAdmissionPolicy", "tau-nodeagent-own-node")
	orig := findKind(readObjects(t, filepath.Join("..", "..", "nodeagent", "deploy", "admission.yaml")), "ValidatingAdmissionPolicy")
	for _, field := range []string{"validations", "variables", "matchConstraints", "failurePolicy"} {
		if diff := cmp.Diff(orig.Object["spec"].(map[string]any)[field], vap.Object["spec"].(map[string]any)[field]); diff != "" {
			t.Errorf("spec.%s differs from nodeagent/deploy/admission.yaml (-deploy +chart):\n%s", field, diff)
		}
	}
	b, _ := json.Marshal(vap.Object["spec"])
	if !strings.Contains(string(b), "system:serviceaccount:"+Namespace+":tau-nodeagent") {
		t.Errorf("the policy does not match the release's service account: %s", b)
	}
	off := render(t, map[string]any{"nodeAgent": map[string]any{"enabled": false}})
	if ds, vap := off.Find("DaemonSet", "tau-nodeagent"), off.Find("ValidatingAdmissionPolicy", "tau-nodeagent-own-node"); ds != nil || vap != nil {
		t.Errorf("nodeAgent.enabled=false still renders the agent's DaemonSet (%v) or its policy (%v)", ds != nil, vap != nil)
	}
}

// TestOptionsRenderWhatTheySay checks the non-default values land where
// they should.
func TestOptionsRenderWhatTheySay(t *testing.T) {
	r, err := RenderOn(Namespace, everyOptionOn(), MonitoringAPIs...)
	if err != nil {
		t.Fatal(err)
	}
	d := convert[appsv1.Deployment](t, r.Find("Deployment", "tau-controller"))
	c := d.Spec.Template.Spec.Containers[0]
	got := map[string]string{
		"image":        c.Image,
		"fetch-image":  arg(c.Args, "--fetch-image"),
		"evidence":     arg(c.Args, "--evidence-bind-address"),
		"cache":        volumeKind(d.Spec.Template.Spec.Volumes, "cache"),
		"s3 secret":    secretEnv(c.Env, "AWS_SECRET_ACCESS_KEY"),
		"log level":    arg(c.Args, "--zap-log-level"),
		"multikueue":   arg(c.Args, "--multikueue-namespace"),
		"workers":      arg(c.Args, "--run-workers") + "," + arg(c.Args, "--repository-workers") + "," + arg(c.Args, "--forge-workers"),
		"memory ratio": arg(c.Args, "--memory-limit-ratio"),
		"forge pace":   arg(c.Args, "--forge-rate") + "," + arg(c.Args, "--forge-burst"),
		"proxies":      arg(c.Args, "--webhook-trusted-proxies"),
		"ingress":      kindNames(r, "Ingress"),
		"monitors":     kindNames(r, "ServiceMonitor"),
		"rules":        kindNames(r, "PrometheusRule"),
		"dashboards":   kindNames(r, "ConfigMap"),
		"platform":     kindNames(r, "TauPlatform"),
		"previews":     platformForge(t, r),
		"pvcs":         kindNames(r, "PersistentVolumeClaim"),
		"agent driver": convert[appsv1.DaemonSet](t, r.Find("DaemonSet", "tau-nodeagent")).Spec.Template.Spec.Containers[0].Image,
	}
	want := map[string]string{
		"image":       "ghcr.io/taugrid/tau-controller@sha256:" + strings.Repeat("a", 64),
		"fetch-image": "ghcr.io/taugrid/tau:v0.2.0", "evidence": ":8090", "cache": "pvc:tau-controller-cache",
		"s3 secret": "evidence-s3/secret-access-key", "log level": "debug", "multikueue": "kueue-system",
		"workers": "64,24,12", "memory ratio": "0.8", "forge pace": "4,40", "proxies": "10.0.0.0/8,fd00::/8",
		"ingress": "tau-controller", "monitors": "tau-controller,tau-nodeagent", "rules": "taugrid",
		"dashboards": "taugrid-dashboard-gpu-health,taugrid-dashboard-gpu-utilization,taugrid-dashboard-kueue,taugrid-dashboard-queues,taugrid-dashboard-ray,taugrid-dashboard-runs",
		"platform":   "platform", "previews": "gitea https://git.example.com platform-forge false hook platform-hook", "pvcs": "tau-controller-cache", "agent driver": "ghcr.io/taugrid/tau-nodeagent:v0.1.1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !slices.Contains(c.Args, "--kube-api-qps=50") {
		t.Errorf("extraArgs missing from %v", c.Args)
	}
}

func secretEnv(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return ""
}

// platformForge is the TauPlatform's spec.forge: type, API URL, Secret
// and check runs, "" when it has none.
func platformForge(t *testing.T, r *Rendered) string {
	t.Helper()
	p := convert[taugridv1.TauPlatform](t, r.Find("TauPlatform", "platform"))
	f := p.Spec.Forge
	if f == nil {
		return ""
	}
	hook := ""
	if w := p.Spec.Webhook; w != nil {
		hook = " hook " + w.SecretRef.Name
	}
	return fmt.Sprintf("%s %s %s %v%s", f.Type, f.APIURL, f.SecretRef.Name, f.CheckRuns, hook)
}

func kindNames(r *Rendered, kind string) string {
	var names []string
	for _, u := range r.Kinds(kind) {
		names = append(names, u.GetName())
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
