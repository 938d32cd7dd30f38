package reconciler

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// twinWorkers are two workers that both fit a one-GPU run.
var twinWorkers = map[string]int64{"east": 8, "west": 8}

// ownFleet starts a fleet of its own for t (a test that stops a worker
// cannot share one), with Kueue's worker-lost timeout short, and points
// this package's fixtures at its manager until t ends.
func ownFleet(t *testing.T, opts controlplane.FleetOptions) *controlplane.Fleet {
	t.Helper()
	integration(t)
	opts.CRDDirectoryPaths = append(opts.CRDDirectoryPaths, "../api/crds")
	opts.MultiKueue = controlplane.MultiKueueSettings{GCInterval: 5 * time.Second, WorkerLostTimeout: 5 * time.Second}
	fl := controlplane.FleetForTest(t, opts)
	c, err := client.New(fl.Manager.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	prevEnv, prevK8s := env, k8s
	env, k8s = fl.Manager, c
	t.Cleanup(func() { env, k8s = prevEnv, prevK8s })
	return fl
}

// failoverTau is the example tau file retrying a lost worker after a
// second.
func failoverTau(t *testing.T) string {
	t.Helper()
	return strings.NewReplacer("retry_on: [Preempted, NodeLost, GPUFault]", "retry_on: [WorkerLost]",
		"initial: 30s", "initial: 1s").Replace(readExample(t, "tau.yaml"))
}

// recording sets a manager's run reconciler to read workers and to send
// its events to rec.
func recording(rec *events.FakeRecorder) func(ctrl.Manager, *RunReconciler) {
	return func(mgr ctrl.Manager, r *RunReconciler) {
		withWorkers(mgr, r)
		r.Recorder = rec
	}
}

// runPodOn is the one pod of the run's current attempt on a worker, once
// it runs there.
func runPodOn(t *testing.T, w client.Client, run *taugridv1.TauRun) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 60*time.Second, "the attempt's pod to run on its worker", func() bool {
		var pods corev1.PodList
		if err := w.List(context.Background(), &pods, client.InNamespace(run.Namespace),
			client.MatchingLabels{render.LabelRun: run.Name, render.LabelAttempt: strconv.Itoa(len(run.Status.Attempts))}); err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = &pods.Items[0]
		return pod.Status.Phase == corev1.PodRunning
	})
	return pod
}

// A worker that disappears while a run runs on it: once Kueue's
// worker-lost timeout takes the run's Workload off it, the attempt ends
// as WorkerLost, naming the worker, the retry says so, and the next
// attempt lands on the other worker, which runs it to success. Each
// attempt records its cluster.
func TestARunWhoseWorkerIsLostIsRetriedOnTheOtherWorker(t *testing.T) {
	fl := ownFleet(t, controlplane.FleetOptions{Workers: []string{"east", "west"}})
	f := newRunFixture(t, "mf1")
	f.research.write("tau/failover.yaml", failoverTau(t))
	f.research.commit("retry a lost worker")
	dispatchTenantTo(t, fl, f, "mf1-a", twinWorkers)
	for name := range twinWorkers {
		if err := fl.Workers[name].AddNodes(context.Background(), controlplane.GPUNode("mf1-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	rec := events.NewFakeRecorder(1000)
	m := startManagerWith(t, recording(rec))
	defer m.stop()

	f.research.runRef("one", "target: failover\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/one")
	waitFor(t, 90*time.Second, "the run to run on a worker", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseRunning
	})
	lost := run.Status.Workload.Cluster
	other := map[string]string{"east": "west", "west": "east"}[lost]
	if other == "" {
		t.Fatalf("the run runs on cluster %q, want east or west", lost)
	}
	if err := fl.StopWorker(lost, false); err != nil {
		t.Fatal(err)
	}
	var retried string
	waitFor(t, 120*time.Second, "the attempt to end WorkerLost and the next to run on "+other, func() bool {
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, ReasonRetrying) {
				retried = e
			}
		}
		run = getRun(t, f.ns, run.Name)
		return len(run.Status.Attempts) == 2 && run.Status.Phase == taugridv1.PhaseRunning
	})
	first := run.Status.Attempts[0]
	if first.FailureClass != string(FailureWorkerLost) || first.Cluster != lost ||
		!strings.Contains(first.Reason, "worker cluster "+lost+" stopped answering") {
		t.Errorf("attempt 1 ended %s on %q: %q; want WorkerLost on %s, saying it stopped answering", first.FailureClass, first.Cluster, first.Reason, lost)
	}
	for _, want := range []string{"retrying in 1s (attempt 2 of 3) after failed (WorkerLost): worker cluster " + lost} {
		if !strings.Contains(retried, want) {
			t.Errorf("the retry said %q, want %q", retried, want)
		}
	}
	if got := run.Status.Workload.Cluster; got != other {
		t.Fatalf("attempt 2 runs on %q, want %s", got, other)
	}
	w := workerClient(t, fl, other)
	exitPodOn(t, w, runPodOn(t, w, run), 0)
	waitFor(t, 60*time.Second, "the retried run to succeed on "+other, func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseSucceeded
	})
	clusters := []string{run.Status.Attempts[0].Cluster, run.Status.Attempts[1].Cluster}
	if !slices.Equal(clusters, []string{lost, other}) {
		t.Errorf("the attempts record clusters %v, want [%s %s]", clusters, lost, other)
	}
}
