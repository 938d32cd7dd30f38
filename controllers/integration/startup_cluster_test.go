package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runctrl "github.com/taugrid/taugrid/controllers/run"
)

// A second control plane for the tests that need pods to be real: the
// Job controller makes them, the scheduler places them on nodes sized like
// real ones or leaves them Pending, and kwok runs them. Started by the
// first test that asks, stopped when the package's tests end.
var (
	clusterOnce sync.Once
	clusterEnv  *controlplane.Env
	clusterErr  error
)

// onCluster points this package's fixtures (env, k8s) at the control plane
// with nodes until t ends. The package's tests run one at a time.
func onCluster(t *testing.T) {
	t.Helper()
	integration(t)
	clusterOnce.Do(func() {
		clusterEnv, clusterErr = controlplane.Start(context.Background(),
			controlplane.Options{Kueue: true, KubeRay: true, Nodes: true, CRDDirectoryPaths: []string{"../../api/crds"}})
	})
	if clusterErr != nil {
		t.Fatalf("starting the control plane with nodes: %v", clusterErr)
	}
	c, err := client.New(clusterEnv.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	prevEnv, prevK8s := env, k8s
	env, k8s = clusterEnv, c
	t.Cleanup(func() { env, k8s = prevEnv, prevK8s })
}

// stopCluster stops the control plane with nodes, if a test started it.
func stopCluster() {
	if clusterEnv != nil {
		_ = clusterEnv.Stop()
	}
}

// addNode adds a node for kwok to run, removed when t ends.
func addNode(t *testing.T, n *corev1.Node) {
	t.Helper()
	if err := env.AddNodes(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
}

// A run Kueue admits onto quota no node can hold says Admitted, never
// Running, and says why in the scheduler's words, within seconds; once a
// node that fits joins, it runs, and it succeeds when its pod exits 0.
func TestAnAdmittedRunThatFitsNoNodeSaysWhyAndRunsOnceANodeFits(t *testing.T) {
	onCluster(t)
	f := newRunFixture(t, "tc1")
	// An H200 node too short of memory for the run's 32Gi.
	small := controlplane.GPUNode("tc1-small")
	small.Status.Capacity[corev1.ResourceMemory] = resource.MustParse("16Gi")
	small.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("16Gi")
	addNode(t, small)
	m := startManager(t)
	defer m.stop()

	f.research.runRef("big", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/big")
	waitFor(t, 60*time.Second, "the run to say its pod fits no node", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseAdmitted && strings.Contains(run.Status.Message, "no node fits")
	})
	explained := time.Since(phaseTime(run, taugridv1.PhaseAdmitted))
	t.Logf("admitted to explained: %s; %q", explained.Round(time.Millisecond), run.Status.Message)
	if explained > 30*time.Second {
		t.Errorf("the run explained itself %s after admission, want within 30s", explained)
	}
	for _, want := range []string{"no node fits the pod, even empty: 0/1 nodes are available: 1 Insufficient memory; pod ", "needs 1 nvidia.com/gpu, 8 cpu, 32Gi memory"} {
		if !strings.Contains(run.Status.Message, want) {
			t.Errorf("the run's message lacks %q: %q", want, run.Status.Message)
		}
	}
	// It stays so: nothing it shows is Running.
	time.Sleep(3 * time.Second)
	if run = getRun(t, f.ns, run.Name); run.Status.Phase != taugridv1.PhaseAdmitted || everRunning(run) {
		t.Fatalf("a run whose pod fits no node reached %s (phases %v)", run.Status.Phase, run.Status.Phases)
	}

	addNode(t, controlplane.GPUNode("tc1-full"))
	joined := time.Now()
	// Alone it takes a fraction of a second (docs/benchmarks.md); under
	// make test's load the scheduler and kwok have been slower, so the
	// wait is long and a slow one is told with what the cluster showed.
	waitForSaying(t, 90*time.Second, "the run to run once a node fits", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseRunning
	}, func() string { return placementView(f.ns, run.Name) })
	took := time.Since(joined)
	t.Logf("node joined to Running: %s", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Logf("slow to run; the cluster shows:%s", placementView(f.ns, run.Name))
	}
	pods := podsOfRun(t, run)
	if len(pods) != 1 || pods[0].Spec.NodeName != "tc1-full" || !runctrl.PodRunning(&pods[0]) {
		t.Fatalf("Running, yet the attempt's pods are %v", podStates(pods))
	}

	exitPod(t, &pods[0], 0)
	waitFor(t, 30*time.Second, "the run to succeed once its pod exits 0", func() bool {
		return getRun(t, f.ns, run.Name).Status.Phase == taugridv1.PhaseSucceeded
	})
}

func getRun(t *testing.T, ns, name string) *taugridv1.TauRun {
	t.Helper()
	run := &taugridv1.TauRun{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
		t.Fatal(err)
	}
	return run
}

// phaseTime is when the run last entered phase.
func phaseTime(run *taugridv1.TauRun, phase taugridv1.RunPhase) time.Time {
	for i := len(run.Status.Phases) - 1; i >= 0; i-- {
		if run.Status.Phases[i].Phase == phase {
			return run.Status.Phases[i].Time.Time
		}
	}
	return time.Time{}
}

func everRunning(run *taugridv1.TauRun) bool {
	for _, p := range run.Status.Phases {
		if p.Phase == taugridv1.PhaseRunning {
			return true
		}
	}
	return false
}

func podsOfRun(t *testing.T, run *taugridv1.TauRun) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(run.Namespace), client.MatchingLabels{render.LabelRun: run.Name}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func podStates(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+" on "+p.Spec.NodeName+": "+string(p.Status.Phase))
	}
	return out
}

// exitPod ends every container of a running pod with code, as its kubelet
// would report: kwok runs pods, and a test decides when they end.
func exitPod(t *testing.T, p *corev1.Pod, code int32) {
	t.Helper()
	exitPodOn(t, k8s, p, code)
}

// exitPodOn is exitPod on the cluster c reaches.
func exitPodOn(t *testing.T, c client.Client, p *corev1.Pod, code int32) {
	t.Helper()
	phase, reason := corev1.PodSucceeded, "Completed"
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	// On the latest copy: the Job controller writes the pod too.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = phase
		for i := range cur.Status.ContainerStatuses {
			cs := &cur.Status.ContainerStatuses[i]
			cs.Ready, cs.Started = false, new(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: now}}
		}
		for i := range cur.Status.Conditions {
			if c := &cur.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status = corev1.ConditionFalse
			}
		}
		return c.Status().Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A Ray run whose second worker no node can hold says so, naming the
// worker and what it asks, instead of "starting"; it runs once every Ray
// pod runs on a node of its own.
func TestARayRunWhoseWorkerFitsNoNodeSaysSoAndRunsWhenEveryPodRuns(t *testing.T) {
	onCluster(t)
	f := newRunFixture(t, "tc2")
	addNode(t, controlplane.GPUNode("tc2-gpu-1"))
	m := startManager(t)
	defer m.stop()

	f.research.runRef("ray", "target: ray\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/ray")
	waitFor(t, 90*time.Second, "the Ray run to say a worker fits no node", func() bool {
		run = getRun(t, f.ns, run.Name)
		return strings.Contains(run.Status.Message, "no node fits")
	})
	t.Logf("%s: %q", run.Status.Phase, run.Status.Message)
	for _, want := range []string{"no node fits a Ray worker: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu; pod ", "-gpu-worker-", "needs 8 nvidia.com/gpu, 48 cpu, 512Gi memory"} {
		if !strings.Contains(run.Status.Message, want) {
			t.Errorf("the run's message lacks %q: %q", want, run.Status.Message)
		}
	}
	if strings.Contains(run.Status.Message, "even empty") {
		t.Errorf("a worker an empty node would hold is said never to fit: %q", run.Status.Message)
	}
	if run.Status.Phase != taugridv1.PhaseAdmitted || everRunning(run) {
		t.Fatalf("a Ray run with a worker on no node reached %s (phases %v)", run.Status.Phase, run.Status.Phases)
	}

	addNode(t, controlplane.GPUNode("tc2-gpu-2"))
	waitFor(t, 60*time.Second, "the Ray run to run once both workers run", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseRunning
	})
	var ray int
	for _, p := range podsOfRun(t, run) {
		if role := p.Labels[runctrl.RayNodeType]; role == "head" || role == "worker" {
			ray++
			if !runctrl.PodRunning(&p) {
				t.Errorf("Running, yet Ray pod %s is %s", p.Name, p.Status.Phase)
			}
		}
	}
	if ray != 3 {
		t.Errorf("Running with %d Ray pods, want the head and 2 workers", ray)
	}
}

// placementView is what the cluster shows of a run whose pods were to run
// and did not, for a test that waited in vain: the run's phase and message,
// its pods with their conditions, the nodes with their readiness and
// taints, and the last lines of the scheduler's and kwok's logs that name
// the run's pods (the control plane's logs go with the package). The API
// server keeps these times in whole seconds; the logs have finer ones.
func placementView(ns, name string) string {
	ctx := context.Background()
	var b strings.Builder
	run := &taugridv1.TauRun{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
		fmt.Fprintf(&b, "\n  run: %v", err)
	}
	fmt.Fprintf(&b, "\n  run %s: %s %q", name, run.Status.Phase, run.Status.Message)
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{render.LabelRun: name}); err != nil {
		fmt.Fprintf(&b, "\n  pods: %v", err)
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\n  pod %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "; %s=%s %s %s (%s)", c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime.Format(time.Stamp))
		}
	}
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		fmt.Fprintf(&b, "\n  nodes: %v", err)
	}
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "\n  node %s created %s taints %v", n.Name, n.CreationTimestamp.Format(time.Stamp), n.Spec.Taints)
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				fmt.Fprintf(&b, "; Ready=%s since %s", c.Status, c.LastTransitionTime.Format(time.Stamp))
			}
		}
	}
	for _, component := range []string{controlplane.BinScheduler, controlplane.BinKwok} {
		for _, l := range logLines(component, 10, func(l string) bool {
			return slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return strings.Contains(l, p.Name) })
		}) {
			fmt.Fprintf(&b, "\n  %s: %s", component, l)
		}
	}
	return b.String()
}
