package images

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fmt"
	"github.com/taugrid/taugrid/render"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"strings"

	"github.com/taugrid/taugrid/api/gpus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/test/chart"
	"github.com/taugrid/taugrid/test/controlplane"
)

// gitServer serves the example platform and research repos over smart
// HTTP with the real git http-backend; it returns the server's URL and the
// research repo's work tree.
func gitServer(t *testing.T) (string, string, []string) {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &gittest.HTTPServer{Root: filepath.Join(dir, "git")}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + l.Addr().String()
	env := gittest.Env(filepath.Join(dir, "home"))
	var research string
	for _, r := range []struct{ name, src string }{{"platform", "examples/platform"}, {"team-a/research", "examples/research"}} {
		work := filepath.Join(dir, "work", r.name)
		if err := gittest.InitBare(env, filepath.Join(dir, "git", r.name+".git")); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(work, os.DirFS(filepath.Join(root, r.src))); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"init", "--quiet", "--initial-branch=main", work}, {"-C", work, "add", "-A"},
			{"-C", work, "commit", "--quiet", "-m", "example"}, {"-C", work, "remote", "add", "origin", base + "/" + r.name + ".git"},
			{"-C", work, "push", "--quiet", "origin", "main"}} {
			if _, err := gittest.Git(env, "", nil, args...); err != nil {
				t.Fatal(err)
			}
		}
		research = work
	}
	return base, research, env
}

// TestTheChartRunsItsOwnImages: the images built here, loaded into podman,
// run as the chart renders them. The controller, under the rendered
// ServiceAccount's RBAC, with a read-only root and only the rendered
// volumes writable, becomes ready, reconciles the chart's TauPlatform and a
// TauRepository, and serves a run's source archive, which the tau image
// (the rendered init container's command) fetches, checks and unpacks.
// The node agent starts and reports NVML absent as Unknown.
func TestTheChartRunsItsOwnImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds images and runs the control plane; run without -short")
	}
	p := needPodman(t)
	start := time.Now()
	const tag = "v0.0.0-chart-test"
	buildAndLoad(t, p, tag)
	env := controlplane.ForTest(t, controlplane.Options{Kueue: true, CRDDirectoryPaths: []string{filepath.Join(root, "api", "crds")}})
	gitURL, research, gitEnv := gitServer(t)
	ports := freePorts(t, 6)
	r, err := chart.Render(chart.Namespace, values(tag, gitURL, ports))
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client
	for _, ns := range []string{chart.Namespace, "team-a"} {
		if err := c.Create(context.Background(), nsObject(ns)); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, c, r, "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	runController(t, p, env, r, ports)
	apply(t, c, r, "TauPlatform")
	run := reconcileARun(t, tauClient(t, env), gitURL, research, gitEnv)
	fetchSource(t, p, tauClient(t, env), run)
	runNodeAgent(t, p, env, tauClient(t, env), r, ports[5])
	t.Logf("the chart-from-images test took %s", time.Since(start).Round(time.Second))
}

func runController(t *testing.T, p *podman, env *controlplane.Env, r *chart.Rendered, ports []int) {
	t.Helper()
	ctr, podSec := deployment(t, r)
	vols := map[string]string{"cache": emptyDir(t), "tmp": emptyDir(t),
		// As the chart projects it: the controller's token for the agents.
		"node-agent-token": serviceAccountDir(t, env, chart.Namespace, "tau-controller", gpus.Audience)}
	args := runArgs(t, ctr, podSec, pod{env: map[string]string{"metadata.namespace": chart.Namespace}, volumes: vols,
		extra: inCluster(t, env)})
	sa := "--volume=" + serviceAccountDir(t, env, chart.Namespace, "tau-controller") + ":/var/run/secrets/kubernetes.io/serviceaccount:ro"
	p.must(append([]string{"run", "--detach", "--name", "tau-controller", sa}, args...)...)
	logsOnFailure(t, p, "tau-controller")
	probe := ctr.ReadinessProbe.HTTPGet
	waitFor(t, 90*time.Second, "the controller's readiness probe", func() (bool, string) {
		return httpOK("http://127.0.0.1:" + itoa(ports[1]) + probe.Path)
	})
}

// reconcileARun waits for the chart's TauPlatform to be in force, registers
// the research repo, pushes a run tag and returns the run once its source
// archive is built and its first attempt's Job made.
func reconcileARun(t *testing.T, c client.Client, gitURL, research string, gitEnv []string) *taugridv1.TauRun {
	t.Helper()
	ctx := context.Background()
	waitFor(t, 60*time.Second, "the TauPlatform's policy in force", func() (bool, string) {
		pl := &taugridv1.TauPlatform{}
		if err := c.Get(ctx, client.ObjectKey{Name: "platform"}, pl); err != nil {
			return false, err.Error()
		}
		return pl.Status.Commit != "", conditions(pl.Status.Conditions)
	})
	repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: "research", Namespace: "team-a"},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: gitURL + "/team-a/research.git"},
			Platform: "platform", Interval: metav1.Duration{Duration: 2 * time.Second}}}
	if err := c.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the TauRepository polled", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
			return false, err.Error()
		}
		return repo.Status.LastPollTime != nil, conditions(repo.Status.Conditions)
	})
	for _, args := range [][]string{{"-C", research, "tag", "run/from-images"}, {"-C", research, "push", "--quiet", "origin", "run/from-images"}} {
		if _, err := gittest.Git(gitEnv, "", nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	var run taugridv1.TauRun
	waitFor(t, 90*time.Second, "a TauRun with its source archive and first attempt", func() (bool, string) {
		var runs taugridv1.TauRunList
		if err := c.List(ctx, &runs, client.InNamespace("team-a")); err != nil || len(runs.Items) == 0 {
			return false, fmt.Sprint("no run yet ", err)
		}
		run = runs.Items[0]
		return run.Status.SourceDigest != "" && len(run.Status.Attempts) > 0, fmt.Sprintf("%s: %s", run.Status.Phase, run.Status.Message)
	})
	return &run
}

// attemptPod is the pod the Job controller would create for the run's
// current attempt: the rendered template of the Job the controller made.
func attemptPod(t *testing.T, c client.Client, run *taugridv1.TauRun) *corev1.Pod {
	t.Helper()
	var jobs batchv1.JobList
	if err := c.List(context.Background(), &jobs, client.InNamespace(run.Namespace), client.MatchingLabels{render.LabelRun: run.Name}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("run %s has %d Jobs, want 1", run.Name, len(jobs.Items))
	}
	tmpl := jobs.Items[0].Spec.Template
	if tmpl.Spec.ServiceAccountName == "" {
		// What the ServiceAccount admission plugin and controller do in a
		// cluster; envtest runs neither.
		tmpl.Spec.ServiceAccountName = "default"
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: run.Namespace}}
		if err := c.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, GenerateName: run.Name + "-", Labels: tmpl.Labels}, Spec: tmpl.Spec}
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// fetchSource runs the pod's init container from the tau image, with the
// pod-bound token the kubelet would project, and checks what it unpacked.
func fetchSource(t *testing.T, p *podman, c client.Client, run *taugridv1.TauRun) {
	t.Helper()
	rp := attemptPod(t, c, run)
	if len(rp.Spec.InitContainers) != 1 {
		t.Fatalf("the run's pod has %d init containers, want the source fetch", len(rp.Spec.InitContainers))
	}
	init := rp.Spec.InitContainers[0]
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{render.SourceTokenAudience},
		ExpirationSeconds: ptr.To(int64(600)), BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: rp.Name, UID: rp.UID}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: rp.Spec.ServiceAccountName, Namespace: rp.Namespace}}
	if err := c.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatal(err)
	}
	vols := map[string]string{}
	for _, m := range init.VolumeMounts {
		vols[m.Name] = emptyDir(t)
	}
	tokenVol := init.VolumeMounts[1].Name
	for _, v := range rp.Spec.Volumes {
		if v.Projected != nil && v.Name == tokenVol {
			path := v.Projected.Sources[0].ServiceAccountToken.Path
			if err := os.WriteFile(filepath.Join(vols[tokenVol], path), []byte(tr.Status.Token), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	args := runArgs(t, init, rp.Spec.SecurityContext, pod{volumes: vols, hosts: []string{"tau-controller." + chart.Namespace + ".svc:127.0.0.1"}})
	out := p.must(append([]string{"run", "--rm", "--name", "tau-source"}, args...)...)
	if !strings.Contains(out, "unpacked") || !strings.Contains(out, run.Status.SourceDigest) {
		t.Errorf("fetch-source said %q, want it to name the unpacked archive %s", out, run.Status.SourceDigest)
	}
	want, _ := os.ReadFile(filepath.Join(root, "examples", "research", "train.py"))
	if got, err := os.ReadFile(filepath.Join(vols[init.VolumeMounts[0].Name], "train.py")); err != nil || string(got) != string(want) {
		t.Errorf("train.py in the source volume: %v, %d bytes; want the commit's %d", err, len(got), len(want))
	}
}

// runNodeAgent runs the rendered DaemonSet's container on a GPU node with
// no NVIDIA driver: the agent must say Unknown, never healthy. Its token is
// bound to a pod on that node, as the kubelet's is, which the chart's
// admission policy reads to narrow its writes to its own Node.
func runNodeAgent(t *testing.T, p *podman, env *controlplane.Env, c client.Client, r *chart.Rendered, port int) {
	t.Helper()
	ctx := context.Background()
	apply(t, c, r, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	ds := fromUnstructured[appsv1.DaemonSet](t, r.Find("DaemonSet", "tau-nodeagent"))
	spec := ds.Spec.Template.Spec
	spec.NodeName = node.Name
	agentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tau-nodeagent-test", Namespace: chart.Namespace, Labels: ds.Spec.Template.Labels}, Spec: spec}
	agentPod.Spec.RuntimeClassName = nil // no RuntimeClass object here; the container runs without NVIDIA's runtime
	if err := c.Create(ctx, agentPod); err != nil {
		t.Fatal(err)
	}
	sa := "--volume=" + boundServiceAccountDir(t, env, c, agentPod) + ":/var/run/secrets/kubernetes.io/serviceaccount:ro"
	// The kubelet's PodResources directory holds no socket here: the agent
	// reports its GPUs unattributed, which must not change its verdict.
	vols := map[string]string{"pod-resources": emptyDir(t)}
	args := runArgs(t, spec.Containers[0], spec.SecurityContext, pod{env: map[string]string{"spec.nodeName": node.Name}, volumes: vols, extra: inCluster(t, env)})
	p.must(append([]string{"run", "--detach", "--name", "tau-nodeagent", sa}, args...)...)
	logsOnFailure(t, p, "tau-nodeagent")
	waitFor(t, 60*time.Second, "the node agent's TauGPUHealthy condition", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err.Error()
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == "TauGPUHealthy" {
				if cond.Status == corev1.ConditionTrue {
					t.Fatalf("the agent reports a node without NVML healthy: %+v", cond)
				}
				return cond.Status == corev1.ConditionUnknown, fmt.Sprintf("%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		return false, "no TauGPUHealthy condition"
	})
	// Its loop turns on the poll interval: on a loaded CI machine the first
	// answer may come while a turn is late (CI once saw a 503 here that a
	// rerun did not); a loop that stays stalled fails the wait.
	waitFor(t, 30*time.Second, "the node agent's /healthz", func() (bool, string) {
		return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	})
}

// boundServiceAccountDir is serviceAccountDir with the token bound to
// the pod, as the kubelet asks for it.
func boundServiceAccountDir(t *testing.T, env *controlplane.Env, c client.Client, p *corev1.Pod) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.ServiceAccountName, Namespace: p.Namespace}}
	if err := c.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatal(err)
	}
	return tokenDir(t, env, p.Namespace, tr.Status.Token)
}

// tauClient is a system:masters client that knows TauGrid's kinds.
func tauClient(t *testing.T, env *controlplane.Env) client.Client {
	t.Helper()
	s := controlplane.NewScheme()
	if err := taugridv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
