package reconciler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// A fleet for the multi-cluster tests: a MultiKueue manager, where
// TauGrid runs, and two workers with nodes, "small" and "large". Started
// by the first test that asks, stopped when the package's tests end.
var (
	fleetOnce sync.Once
	fleet     *controlplane.Fleet
	fleetErr  error
)

// The workers, and the GPU quota each gives the tenant.
var fleetWorkers = map[string]int64{"small": 0, "large": 8}

// onFleet points this package's fixtures (env, k8s) at the fleet's
// manager until t ends, and returns the fleet.
func onFleet(t *testing.T) *controlplane.Fleet {
	t.Helper()
	integration(t)
	fleetOnce.Do(func() {
		fleet, fleetErr = controlplane.StartFleet(context.Background(), controlplane.FleetOptions{
			Workers: []string{"small", "large"}, CRDDirectoryPaths: []string{"../api/crds"},
			MultiKueue: controlplane.MultiKueueSettings{GCInterval: 5 * time.Second, WorkerLostTimeout: 10 * time.Second},
		})
	})
	if fleetErr != nil {
		t.Fatalf("starting the fleet: %v", fleetErr)
	}
	c, err := client.New(fleet.Manager.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	prevEnv, prevK8s := env, k8s
	env, k8s = fleet.Manager, c
	t.Cleanup(func() { env, k8s = prevEnv, prevK8s })
	return fleet
}

// stopFleet stops the fleet, if a test started it.
func stopFleet() {
	if fleet != nil {
		_ = fleet.Manager.Stop()
		for _, w := range fleet.Workers {
			_ = w.Stop()
		}
	}
}

// workerClient is a client of a fleet worker with this package's scheme.
func workerClient(t *testing.T, f *controlplane.Fleet, name string) client.Client {
	t.Helper()
	c, err := client.New(f.Workers[name].Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dispatchTenant makes the fixture's tenant dispatch through MultiKueue:
// its ClusterQueue in the manager gets the check, and each worker gets the
// tenant's namespace, LocalQueue, ClusterQueue (with that worker's GPU
// quota, alone in its cohort), flavor and priorities, as the platform
// declares them.
func dispatchTenant(t *testing.T, fl *controlplane.Fleet, f *runFixture, cqName string) {
	t.Helper()
	ctx := context.Background()
	var workers []string
	for name := range fleetWorkers {
		workers = append(workers, name)
		create(t, k8s, clusters.Cluster(clusters.Worker{Name: name, Secret: controlplane.KubeconfigSecret(name)}))
	}
	check, config := clusters.Dispatch(cqName, workers)
	create(t, k8s, check, config)
	cq := &kueue.ClusterQueue{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: cqName}, cq); err != nil {
		t.Fatal(err)
	}
	orig := cq.DeepCopy()
	clusters.WithDispatch(cq)
	if err := k8s.Patch(ctx, cq, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	lq := &kueue.LocalQueue{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "runs"}, lq); err != nil {
		t.Fatal(err)
	}
	var flavors kueue.ResourceFlavorList
	var priorities kueue.WorkloadPriorityClassList
	if err := k8s.List(ctx, &flavors); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &priorities); err != nil {
		t.Fatal(err)
	}
	for name, gpus := range fleetWorkers {
		w := workerClient(t, fl, name)
		wcq := orig.DeepCopy()
		wcq.Spec.CohortName = ""
		for i := range wcq.Spec.ResourceGroups[0].Flavors[0].Resources {
			if r := &wcq.Spec.ResourceGroups[0].Flavors[0].Resources[i]; r.Name == "nvidia.com/gpu" {
				r.NominalQuota, r.BorrowingLimit = *resource.NewQuantity(gpus, resource.DecimalSI), nil
			}
		}
		objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, wcq, lq.DeepCopy()}
		for i := range flavors.Items {
			objs = append(objs, &flavors.Items[i])
		}
		for i := range priorities.Items {
			objs = append(objs, &priorities.Items[i])
		}
		for _, o := range objs {
			o = o.DeepCopyObject().(client.Object)
			o.SetResourceVersion("")
			o.SetUID("")
			o.SetManagedFields(nil)
			o.SetOwnerReferences(nil)
			if err := w.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
				t.Fatalf("worker %s: creating %T %s: %v", name, o, o.GetName(), err)
			}
		}
	}
	waitFor(t, 60*time.Second, "the manager's Kueue to reach both workers", func() bool {
		var ac kueue.AdmissionCheck
		return k8s.Get(ctx, client.ObjectKey{Name: check.Name}, &ac) == nil &&
			apimeta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive)
	})
}

// create creates objects, failing the test on error.
func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// withWorkers sets a manager's run reconciler to read dispatched runs'
// pods from their workers, as cmd/tau-controller does with MultiKueue.
func withWorkers(mgr ctrl.Manager, r *RunReconciler) {
	r.Clusters = newWorkers(mgr)
}

// newWorkers reads dispatched runs' pods from the fleet's workers.
func newWorkers(mgr ctrl.Manager) *clusters.Workers {
	metrics, err := clusters.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		panic(err) // a fresh registry refuses nothing
	}
	return &clusters.Workers{
		Local:   &clusters.Pods{Reader: mgr.GetClient()},
		Manager: mgr.GetAPIReader(), Namespace: controlplane.KueueNamespace, Scheme: scheme, Metrics: metrics,
	}
}

// maxWorkerCallsPerRun bounds the requests the run reconciler makes to a
// worker for one short run: a look every workerResync, each listing the
// attempt's pods (and nodes, or a node per pod, only when they explain a
// wait or a failure).
const maxWorkerCallsPerRun = 200

// A researcher's run, pushed as on one cluster, is dispatched by the
// manager's Kueue to the only worker with GPU quota for it; it is Running
// as the worker's pods show (the manager has none), records the cluster it
// runs on, and succeeds when its pod on the worker exits 0.
func TestARunDispatchedToTheWorkerThatFitsItRunsThereAndSaysWhere(t *testing.T) {
	fl := onFleet(t)
	f := newRunFixture(t, "mc1")
	dispatchTenant(t, fl, f, "mc1-a")
	large := workerClient(t, fl, "large")
	for name := range fleetWorkers {
		if err := fl.Workers[name].AddNodes(context.Background(), controlplane.GPUNode("mc1-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	m := startManagerWith(t, withWorkers)
	defer m.stop()

	f.research.runRef("one", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/one")
	waitFor(t, 90*time.Second, "the run to run on a worker", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseRunning
	})
	if got := run.Status.Workload.Cluster; got != "large" {
		t.Fatalf("the run runs on cluster %q, want large (the only worker with GPU quota)", got)
	}
	if pods := podsOfRun(t, run); len(pods) != 0 {
		t.Errorf("the manager holds %d pods of the run, want none", len(pods))
	}
	var pods corev1.PodList
	if err := large.List(context.Background(), &pods, client.InNamespace(f.ns), client.MatchingLabels{render.LabelRun: run.Name}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("worker large holds %d pods of the run (%v), want 1", len(pods.Items), err)
	}
	metrics := m.clusters.(*clusters.Workers).Metrics
	following := metrics.Requests("large")
	readsTheWorker(t, m, run, large, &pods.Items[0])
	t.Logf("worker reads: %.0f to follow the run to Running, %.0f for the runs API's attempt pod and diagnosis",
		following, metrics.Requests("large")-following)
	exitPodOn(t, large, &pods.Items[0], 0)
	waitFor(t, 60*time.Second, "the run to succeed once its pod on the worker exits 0", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseSucceeded
	})
	calls := metrics.Requests("large")
	t.Logf("worker reads for the whole run, its diagnosis included: %.0f (%.0f to small)", calls, metrics.Requests("small"))
	if calls > maxWorkerCallsPerRun || metrics.Requests("small") != 0 {
		t.Errorf("%.0f calls to the run's worker, %.0f to the other; want at most %d, and none", calls, metrics.Requests("small"), maxWorkerCallsPerRun)
	}
	if a := run.Status.Attempts[len(run.Status.Attempts)-1]; a.Cluster != "large" || len(a.Nodes) != 0 && a.Nodes[0] != "mc1-large" {
		t.Errorf("the attempt records cluster %q, nodes %v; want large, [mc1-large]", a.Cluster, a.Nodes)
	}
}

// readsTheWorker checks that the runs API's read side finds a dispatched
// run's pod, node and events where they are: the pod and node on the
// worker, the events on both clusters.
func readsTheWorker(t *testing.T, m *runningManager, run *taugridv1.TauRun, worker client.Client, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	api := &server.RunsAPI{Client: m.client, APIReader: k8s, Clusters: m.clusters}
	got, err := api.AttemptPod(ctx, run)
	if err != nil || got == nil || got.Name != pod.Name {
		t.Fatalf("the runs API's attempt pod: %v (%v), want %s from the worker", got, err, pod.Name)
	}
	d, err := api.Diagnosis(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Pods) != 1 || d.Pods[0].Node != pod.Spec.NodeName || !d.Nodes[pod.Spec.NodeName].Exists {
		t.Errorf("the diagnosis shows pods %+v, nodes %+v; want %s on %s, which exists", d.Pods, d.Nodes, pod.Name, pod.Spec.NodeName)
	}
	seen := map[string]bool{}
	for _, e := range d.Events {
		seen[e.Object+" "+e.Reason] = true
	}
	for name, c := range map[string]client.Client{"manager": k8s, "worker": worker} {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(run.Namespace)); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range evs.Items {
			found = found || seen[e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Reason]
		}
		if !found {
			t.Errorf("the diagnosis shows none of the %s's %d events (it shows %v)", name, len(evs.Items), seen)
		}
	}
}
