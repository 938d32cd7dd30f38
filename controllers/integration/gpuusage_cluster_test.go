package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taugrid/taugrid/api/gpus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/policy"
)

// standInAgent serves /gpus as tau-nodeagent does (the real wire types,
// narrowed by ?namespace= as the agent narrows it): one GPU per holder,
// with a point a minute from the holder's start to the test clock's
// minute, at the holder's utilisation.
type standInAgent struct {
	node  string
	clock *clocktesting.FakePassiveClock
	mu    sync.Mutex
	held  []standInHolder
	asked []string // the namespaces asked for
}

type standInHolder struct {
	holder gpus.Holder
	since  time.Time
	pct    float64
}

func (a *standInAgent) hold(ns, pod string, since time.Time, pct float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held = append(a.held, standInHolder{gpus.Holder{Namespace: ns, Pod: pod, Container: "main"}, since.Truncate(time.Minute), pct})
}

func (a *standInAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ns := r.URL.Query().Get("namespace")
	a.asked = append(a.asked, ns)
	now := a.clock.Now()
	rep := gpus.Report{Node: a.node, StepSeconds: 60, GPUs: []gpus.GPU{}}
	for i, h := range a.held {
		if ns != "" && h.holder.Namespace != ns {
			continue
		}
		g := gpus.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", a.node, i), Name: "NVIDIA H200", At: now, UtilizationPct: uint32(h.pct),
			MemoryTotalBytes: 141 << 30, Holder: h.holder}
		for m := h.since; !m.After(now); m = m.Add(time.Minute) {
			g.History = append(g.History, gpus.Point{Start: m, Pct: h.pct, Samples: 6, Holder: h.holder})
		}
		rep.GPUs = append(rep.GPUs, g)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}

// agentPod is tau-nodeagent's pod on node as the chart makes it, which
// kwok runs and gives a pod IP; it returns that IP.
func agentPod(t *testing.T, ns, node string) string {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tau-nodeagent-" + node, Namespace: ns, Labels: map[string]string{runctrl.NodeAgentLabel: runctrl.NodeAgentName}},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "tau-nodeagent", Image: "ghcr.io/taugrid/tau-nodeagent:test",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}}}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "kwok to run the node agent's pod", func() bool {
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		return pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != ""
	})
	return pod.Status.PodIP
}

// agentPods is cmd/tau-controller's cache of the node agents' pods in ns,
// on cfg, started and holding node's agent Running with its IP.
func agentPods(t *testing.T, cfg *rest.Config, ns, node string) client.Reader {
	t.Helper()
	c, err := runctrl.AgentPods(cfg, scheme, ns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	waitFor(t, 30*time.Second, "the agents' cache to hold the agent on "+node, func() bool {
		var pods corev1.PodList
		if c.List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node}) != nil || len(pods.Items) != 1 {
			return false
		}
		return pods.Items[0].Status.Phase == corev1.PodRunning && pods.Items[0].Status.PodIP != ""
	})
	return c
}

// routedTo is an HTTP client whose connections to addr reach the stand-in
// instead: kwok's pod IPs are not routable, so only the last hop is
// replaced; the address is the one the controller found on the agent's pod.
func routedTo(addr string, srv *httptest.Server) (*http.Client, *[]string) {
	var dialed []string
	var mu sync.Mutex
	d := &net.Dialer{Timeout: time.Second}
	return &http.Client{Timeout: runctrl.AgentTimeout, Transport: &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, a)
		mu.Unlock()
		if a != addr {
			return nil, fmt.Errorf("no route to %s", a)
		}
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}}}, &dialed
}

// A platform sets an idle-GPU rule (under 5% for 5 min). The controller
// reads each running attempt's GPUs from the agent on its node, counting
// only its own pods' GPUs: another tenant's and another pod's busy GPUs on
// the same node count for nothing. A busy run gets its summary line; an
// idle one a warning on the run, its commit status and an Event, and once
// the platform's policy is stop, it ends as IdleGPUs with the reason and
// its utilisation series in its evidence.
func TestIdleGPUsAreCaughtAndABusyRunIsSummedUp(t *testing.T) {
	onCluster(t)
	f := newRunFixture(t, "gu1")
	f.plat.repo.edit("limits.yaml", "ttl_after_finished: 24h\n", "ttl_after_finished: 24h\nidle_gpu_percent: 5\nidle_gpu_time: 5m\nidle_policy: warn\n")
	f.plat.repo.commit("catch idle GPUs")
	f.plat.reconcile(t)
	node := "gu1-gpu-1"
	addNode(t, controlplane.GPUNode(node))
	ip := agentPod(t, "gu1-system", node)
	clk := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	agent := &standInAgent{node: node, clock: clk}
	srv := httptest.NewServer(agent)
	t.Cleanup(srv.Close)
	hc, dialed := routedTo(net.JoinHostPort(ip, "8080"), srv)
	// A tenant's pod labelled as an agent, on the same node: the cache
	// holds only the agents' namespace, so the controller never asks it
	// (and never sends it the controller's token).
	decoy := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "not-an-agent", Namespace: f.ns, Labels: map[string]string{runctrl.NodeAgentLabel: runctrl.NodeAgentName}},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "attacker:latest", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}}}}},
	}
	if err := k8s.Create(context.Background(), decoy); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "kwok to run the tenant's pod", func() bool {
		_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(decoy), decoy)
		return decoy.Status.Phase == corev1.PodRunning && decoy.Status.PodIP != ""
	})
	// kwok serves its pods' logs as a kubelet does: through the API
	// server's pods/log, as the sealer reads them.
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if log, err := cs.CoreV1().Pods(f.ns).GetLogs(decoy.Name, &corev1.PodLogOptions{Container: "c", TailLines: ptr.To[int64](1)}).DoRaw(context.Background()); err != nil || string(log) != "done\n" {
		t.Errorf("the last line of the pod's log, read through the API server: %q, %v; want kwok's %q", log, err, "done\n")
	}
	f.runRec.GPUUsage = &runctrl.NodeAgents{Reader: agentPods(t, env.Config, "gu1-system", node), Namespace: "gu1-system", HTTP: hc}
	recorder := events.NewFakeRecorder(100)
	f.runRec.Recorder = recorder
	store := useEvidence(t, f)

	f.research.runRef("busy", "target: default\n")
	f.research.runRef("idle", "target: default\n")
	f.poll(t)
	busy, idle := f.runOf(t, "refs/tau/runs/busy"), f.runOf(t, "refs/tau/runs/idle")
	busy = f.reconcileRun(t, busy.Name, taugridv1.PhaseRunning)
	idle = f.reconcileRun(t, idle.Name, taugridv1.PhaseRunning)
	start := clk.Now()
	agent.hold(f.ns, podsOfRun(t, busy)[0].Name, start, 91)
	agent.hold(f.ns, podsOfRun(t, idle)[0].Name, start, 1)
	agent.hold(f.ns, "notebook-0", start, 100)                                               // the same tenant, another pod
	agent.hold(strings.Replace(f.ns, "-a", "-b", 1), podsOfRun(t, idle)[0].Name, start, 100) // another tenant, a pod of the same name

	clk.SetTime(start.Add(12 * time.Minute))
	busy, idle = f.reconcileOnce(t, busy.Name), f.reconcileOnce(t, idle.Name)
	if u := lastUsage(busy); u == nil || u.Summary != "1 GPU, 91% busy over the last 10 min" || u.Idle {
		t.Errorf("the busy run's usage: %+v", u)
	}
	u := lastUsage(idle)
	if u == nil || !u.Idle || !strings.HasPrefix(u.Summary, "1 GPU, 1% busy over the last 10 min; idle: under 5% since ") {
		t.Fatalf("the idle run's usage: %+v", u)
	}
	if d := cmp.Diff([]string{"GPU-" + node + "-1"}, u.UUIDs); d != "" { // its own GPU: not the notebook's, not the other tenant's
		t.Errorf("the idle run's GPUs by UUID (-want +got):\n%s", d)
	}
	if idle.Status.Phase != taugridv1.PhaseRunning {
		t.Errorf("under idle_policy: warn the idle run is %s: %s", idle.Status.Phase, idle.Status.Message)
	}
	if d := forge.Desired(idle).Description; !strings.Contains(d, "warning: GPUs idle") {
		t.Errorf("the idle run's commit status says %q, want a warning", d)
	}
	if d := forge.Desired(busy).Description; d != "running" {
		t.Errorf("the busy run's commit status says %q", d)
	}
	if ev := strings.Join(drain(recorder), "\n"); !strings.Contains(ev, "Warning GPUsIdle 1 GPU under 5% busy since") || strings.Count(ev, "GPUsIdle") != 1 {
		t.Errorf("events: %s", ev)
	}
	for _, ns := range agent.asked {
		if ns != f.ns {
			t.Errorf("the controller asked the agent for namespace %q, want only %q", ns, f.ns)
		}
	}
	for _, a := range *dialed {
		if a != net.JoinHostPort(ip, "8080") {
			t.Errorf("the controller dialled %s, not the agent pod's metrics port", a)
		}
	}

	t.Run("read at most once a minute", func(t *testing.T) {
		n := len(agent.asked)
		clk.SetTime(clk.Now().Add(20 * time.Second))
		f.reconcileOnce(t, idle.Name)
		f.reconcileOnce(t, busy.Name)
		if len(agent.asked) != n {
			t.Errorf("%d reads within a minute of the last", len(agent.asked)-n)
		}
	})

	t.Run("under idle_policy: stop the idle run ends as IdleGPUs, recorded in its evidence", func(t *testing.T) {
		f.plat.repo.edit("limits.yaml", "idle_policy: warn\n", "idle_policy: stop\n")
		f.plat.repo.commit("end idle runs")
		f.plat.reconcile(t)
		clk.SetTime(clk.Now().Add(time.Minute))
		ended := f.reconcileRun(t, idle.Name, taugridv1.PhaseFailed)
		a := ended.Status.Attempts[len(ended.Status.Attempts)-1]
		if a.FailureClass != string(taugridv1.FailureIdleGPUs) || !strings.Contains(ended.Status.Message, "failed (IdleGPUs): its GPUs were idle: 1 GPU, 1% busy") {
			t.Errorf("ended as %s: %s", a.FailureClass, ended.Status.Message)
		}
		raw, err := store.Manifest(context.Background(), evidence.Key{Namespace: f.ns, Run: idle.Name, Attempt: 1})
		if err != nil {
			t.Fatalf("no sealed bundle: %v", err)
		}
		m, _ := evidence.ParseManifest(raw)
		rec := &evidence.Record{}
		for _, art := range m.Artifacts {
			if art.Name == evidence.ArtifactRecord {
				data, _ := store.Blob(context.Background(), art.SHA256)
				if err := yaml.Unmarshal(data, rec); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := rec.Attempts[0]
		if got.FailureClass != "IdleGPUs" || got.GPUUsage == nil || !got.GPUUsage.Idle || len(got.GPUUsage.Points) < 12 {
			t.Fatalf("the evidence's attempt: %+v (usage %+v)", got, got.GPUUsage)
		}
		if d := cmp.Diff([]string{"GPU-" + node + "-1"}, got.GPUUsage.UUIDs); d != "" {
			t.Errorf("the evidence's GPUs by UUID (-want +got):\n%s", d)
		}
		if evidence.UsageChart(got.GPUUsage) == nil {
			t.Error("the evidence page draws no utilisation chart")
		}
		if busy = getRun(t, f.ns, busy.Name); busy.Status.Phase != taugridv1.PhaseRunning {
			t.Errorf("the busy run is %s: %s", busy.Status.Phase, busy.Status.Message)
		}
	})
}

// reconcileOnce runs the run reconciler once and returns the run.
func (f *runFixture) reconcileOnce(t *testing.T, name string) *taugridv1.TauRun {
	t.Helper()
	if _, err := f.runRec.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: f.ns, Name: name}}); err != nil {
		t.Fatalf("reconciling run %s: %v", name, err)
	}
	return getRun(t, f.ns, name)
}

// useEvidence seals evidence for the fixture's runs into a file store.
func useEvidence(t *testing.T, f *runFixture) *evidence.FileStore {
	t.Helper()
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	f.runRec.Evidence = &evidence.Page{URL: "https://tau.example/", Links: evidenceLinks}
	f.sealer = &sealing.EvidenceRecorder{Client: cacheLike{k8s}, APIReader: k8s, Logs: runs.PodLogs{Pods: cs.CoreV1()}, Files: f.runRec.Files,
		Policies: f.runRec.Policies.(*policy.PolicyStore), Sources: &server.Sources{BaseURL: "http://tau-controller:9090", FetchImage: "tau:v1"},
		Store: st, Clock: f.runRec.Clock, Recorder: events.NewFakeRecorder(100),
		Attestations: &sealing.AttestationKeys{Client: k8s, Namespace: f.ns, Name: attestationKeySecret}}
	return st
}

func lastUsage(run *taugridv1.TauRun) *taugridv1.GPUUsage {
	if n := len(run.Status.Attempts); n > 0 {
		return run.Status.Attempts[n-1].GPUUsage
	}
	return nil
}
