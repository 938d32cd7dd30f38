package integration

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// fleetTests matches the names of the tests that run on a MultiKueue
// fleet: make test runs them in a process of their own (the Makefile's
// FLEET_TESTS), beside the rest of this package.
var fleetTests = regexp.MustCompile(`Worker|Dispatch|Fleet`)

// namedForTheFleet fails a test that starts worker clusters under a name
// make test would run with the rest, where it would cost the other half.
func namedForTheFleet(t *testing.T) {
	t.Helper()
	if top, _, _ := strings.Cut(t.Name(), "/"); !fleetTests.MatchString(top) {
		t.Fatalf("%s runs on the MultiKueue fleet: name it for a Worker, a Dispatch or the Fleet (%s), so that make test runs it with the fleet's tests", top, fleetTests)
	}
}

// onFleet points this package's fixtures (env, k8s) at the fleet's
// manager until t ends, and returns the fleet.
func onFleet(t *testing.T) *controlplane.Fleet {
	t.Helper()
	integration(t)
	namedForTheFleet(t)
	fleetOnce.Do(func() {
		fleet, fleetErr = controlplane.StartFleet(context.Background(), controlplane.FleetOptions{
			Workers: []string{"small", "large"}, CRDDirectoryPaths: []string{"../../api/crds"},
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

// awaitPhase waits until run reaches phase, and returns it as last read.
func awaitPhase(t *testing.T, run *taugridv1.TauRun, phase taugridv1.RunPhase, within time.Duration, what string) *taugridv1.TauRun {
	t.Helper()
	waitFor(t, within, what, func() bool {
		run = getRun(t, run.Namespace, run.Name)
		return run.Status.Phase == phase
	})
	return run
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
	dispatchTenantTo(t, fl, f, cqName, fleetWorkers)
}

// dispatchTenantTo is dispatchTenant to the workers of quota, each giving
// the tenant its GPUs.
func dispatchTenantTo(t *testing.T, fl *controlplane.Fleet, f *runFixture, cqName string, quota map[string]int64) {
	t.Helper()
	ctx := context.Background()
	var workers []string
	for name := range quota {
		workers = append(workers, name)
		// Shared by every fleet test: the first makes it.
		if err := k8s.Create(ctx, clusters.Cluster(clusters.Worker{Name: name, Secret: controlplane.KubeconfigSecret(name)})); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
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
	for name, gpus := range quota {
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
func withWorkers(mgr ctrl.Manager, c *controllers) {
	c.run.Clusters = newWorkers(mgr)
}

// workerReads is a manager's reader of the fleet's workers that counts,
// per worker, what the run reconciler and the runs API read there
// ("get *v1beta2.Workload", "list *v1.PodList"), besides the requests
// counted by its Metrics.
type workerReads struct {
	workers *clusters.Workers

	mu    sync.Mutex
	reads map[string]map[string]int
}

// install is an adjust func of startManagerWith: withWorkers, counted.
func (w *workerReads) install(mgr ctrl.Manager, c *controllers) {
	w.workers = newWorkers(mgr)
	c.run.Clusters = w
}

// PodsOf is the worker's clusters.Pods with its reads counted.
func (w *workerReads) PodsOf(ctx context.Context, cluster string) (*clusters.Pods, error) {
	p, err := w.workers.PodsOf(ctx, cluster)
	if err != nil || cluster == "" {
		return p, err
	}
	counted := *p
	counted.Reader = countedReader{Reader: p.Reader, count: func(what string) { w.add(cluster, what) }}
	return &counted, nil
}

func (w *workerReads) add(cluster, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reads == nil {
		w.reads = map[string]map[string]int{}
	}
	if w.reads[cluster] == nil {
		w.reads[cluster] = map[string]int{}
	}
	w.reads[cluster][what]++
}

// of is what was read of cluster so far.
func (w *workerReads) of(cluster string) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for what, n := range w.reads[cluster] {
		out[what] = n
	}
	return out
}

// countedReader tells count of each read, by verb and Go type.
type countedReader struct {
	client.Reader
	count func(what string)
}

func (c countedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.count(fmt.Sprintf("get %T", obj))
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c countedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.count(fmt.Sprintf("list %T", list))
	return c.Reader.List(ctx, list, opts...)
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

// maxOtherWorkerCalls bounds the requests to a worker that never holds
// the run, which read nothing there but the worker's copy of the run's
// Workload: one Get per look while the manager's Workload waits for its
// dispatch check with no worker taken yet, to say why it waits
// (explainDispatched). The run is looked at on each change of its Job
// or Workload, a handful while Kueue dispatches it, and every
// progressResync; the worker's client also asks for the API's discovery
// on its first read (a few requests).
const maxOtherWorkerCalls = 20

// A researcher's run, pushed as on one cluster, is dispatched by the
// manager's Kueue to the only worker with GPU quota for it; it is Running
// as the worker's pods show (the manager has none), records the cluster it
// runs on, and succeeds when its pod on the worker exits 0.
func TestARunDispatchedToTheWorkerThatFitsItRunsThereAndSaysWhere(t *testing.T) {
	// A fleet of its own: on the shared one, the GPUs an earlier test's
	// attempt still holds on a worker (its evidence held until sealed)
	// change what the workers say and where the run fits.
	fl := ownFleet(t, controlplane.FleetOptions{Workers: []string{"small", "large"}})
	f := newRunFixture(t, "mc1")
	dispatchTenant(t, fl, f, "mc1-a")
	large := workerClient(t, fl, "large")
	for name := range fleetWorkers {
		if err := fl.Workers[name].AddNodes(context.Background(), controlplane.GPUNode("mc1-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	reads := &workerReads{}
	m := startManagerWith(t, reads.install)
	defer m.stop()

	f.research.runRef("one", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/one")
	run = awaitPhase(t, run, taugridv1.PhaseRunning, 90*time.Second, "the run to run on a worker")
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
	metrics := reads.workers.Metrics
	following := metrics.Requests("large")
	readsTheWorker(t, m, run, large, &pods.Items[0])
	t.Logf("worker reads: %.0f to follow the run to Running, %.0f for the runs API's attempt pod and diagnosis",
		following, metrics.Requests("large")-following)
	exitPodOn(t, large, &pods.Items[0], 0)
	run = awaitPhase(t, run, taugridv1.PhaseSucceeded, 60*time.Second, "the run to succeed once its pod on the worker exits 0")
	calls, other := metrics.Requests("large"), metrics.Requests("small")
	t.Logf("worker reads for the whole run, its diagnosis included: %.0f (%.0f to small: %v)", calls, other, reads.of("small"))
	if calls > maxWorkerCallsPerRun || other > maxOtherWorkerCalls {
		t.Errorf("%.0f calls to the run's worker, %.0f to the other; want at most %d and %d", calls, other, maxWorkerCallsPerRun, maxOtherWorkerCalls)
	}
	for what, n := range reads.of("small") {
		if what != "get *v1beta2.Workload" {
			t.Errorf("the worker that never held the run was read %d× (%s); want only gets of its copy of the Workload", n, what)
		}
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

// clustersYAML declares the fleet's workers for ClusterQueue cq; the small
// worker also names a ClusterQueue kueue/ does not declare (line 7).
func clustersYAML(cq, extra string) string {
	return "clusters:\n" +
		"- name: large\n" +
		"  kubeconfig_secret: " + controlplane.KubeconfigSecret("large") + "\n" +
		"  cluster_queues: [" + cq + "]\n" +
		"- name: small\n" +
		"  kubeconfig_secret: " + controlplane.KubeconfigSecret("small") + "\n" +
		"  cluster_queues: [" + cq + extra + "]\n"
}

// smallQueue is the small worker's own ClusterQueue cq: no GPUs.
func smallQueue(cq, flavor string) string {
	return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: " + cq + "\nspec:\n  namespaceSelector: {}\n" +
		"  resourceGroups:\n  - coveredResources: [cpu, memory, nvidia.com/gpu]\n    flavors:\n    - name: " + flavor + "\n      resources:\n" +
		"      - name: cpu\n        nominalQuota: \"96\"\n      - name: memory\n        nominalQuota: 1024Gi\n      - name: nvidia.com/gpu\n        nominalQuota: 0\n"
}

// The platform repo declares the workers (clusters.yaml) and the small
// worker's own ClusterQueue: a commit whose worker lacks the tenant's PVC,
// or names an undeclared ClusterQueue, is refused with both lines and
// writes nothing to any worker; once fixed, the platform applies the
// MultiKueue objects in the manager and the tenant's namespace and queues
// in each worker, and a pushed run is dispatched to the worker with GPU
// quota, with no object made by hand but the tenant's data.
func TestWorkersDeclaredInThePlatformRepoDispatchRuns(t *testing.T) {
	fl := onFleet(t)
	f := newRunFixture(t, "mc2")
	ctx := context.Background()
	f.plat.r.MultiKueueNamespace = controlplane.KueueNamespace
	f.plat.r.AdmissionCheck = true // as cmd/tau-controller: on the workers' queues too
	cq, lqKey := "mc2-a", client.ObjectKey{Namespace: f.ns, Name: "runs"}
	workers := map[string]client.Client{"large": workerClient(t, fl, "large"), "small": workerClient(t, fl, "small")}
	// What the platform team provisions itself: the tenant's namespace
	// and its data; the large worker's PVC comes later.
	for name, w := range workers {
		create(t, w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hf"}})
		if name == "small" {
			create(t, w, tenantPVC(f.ns))
		}
		if err := fl.Workers[name].AddNodes(ctx, controlplane.GPUNode("mc2-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	f.plat.repo.write("clusters.yaml", clustersYAML(cq, ", nope"))
	f.plat.repo.write("kueue/workers/small/queues.yaml", smallQueue(cq, "mc2-h200"))
	f.plat.repo.commit("dispatch to the fleet")
	p := f.plat.reconcile(t)
	stalled := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionStalled)
	for _, want := range []string{
		"clusters.yaml:2:3: clusters[0]: tenant mc2-a uses PersistentVolumeClaim mc2-a-data, which worker large lacks in namespace mc2-a",
		`clusters.yaml:7:`, `clusters[1].cluster_queues[1]: ClusterQueue "nope" is not declared in kueue/`,
	} {
		if stalled == nil || !strings.Contains(stalled.Message, want) {
			t.Fatalf("the commit is not refused with %q: %+v", want, stalled)
		}
	}
	for name, w := range workers {
		if err := w.Get(ctx, lqKey, &kueue.LocalQueue{}); !apierrors.IsNotFound(err) {
			t.Errorf("worker %s: the refused commit's LocalQueue: %v, want none", name, err)
		}
	}

	create(t, workers["large"], tenantPVC(f.ns))
	f.plat.repo.write("clusters.yaml", clustersYAML(cq, ""))
	f.plat.repo.commit("fix the fleet")
	if p = f.plat.reconcile(t); !apimeta.IsStatusConditionTrue(p.Status.Conditions, taugridv1.ConditionReady) || p.Status.Commit != p.Status.LastAttemptedCommit {
		t.Fatalf("the fixed commit is not applied: %+v", p.Status.Conditions)
	}
	for name, w := range workers {
		wcq := &kueue.ClusterQueue{}
		if err := w.Get(ctx, lqKey, &kueue.LocalQueue{}); err != nil {
			t.Errorf("worker %s: the tenant's LocalQueue: %v", name, err)
		}
		policyCheck := platformctrl.PolicyCheckName(f.plat.name)
		if err := w.Get(ctx, client.ObjectKey{Name: cq}, wcq); err != nil || wcq.Spec.CohortName != "" || wcq.Spec.AdmissionChecksStrategy == nil ||
			len(wcq.Spec.AdmissionChecksStrategy.AdmissionChecks) != 1 || string(wcq.Spec.AdmissionChecksStrategy.AdmissionChecks[0].Name) != policyCheck {
			t.Errorf("worker %s: ClusterQueue %s: %v, cohort %q, checks %+v; want it alone, admitting on its own quota what passes %s", name, cq, err, wcq.Spec.CohortName, wcq.Spec.AdmissionChecksStrategy, policyCheck)
		}
	}
	waitFor(t, 60*time.Second, "the platform's MultiKueue check to reach both workers", func() bool {
		var ac kueue.AdmissionCheck
		return k8s.Get(ctx, client.ObjectKey{Name: clusters.CheckName(cq)}, &ac) == nil &&
			apimeta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive)
	})

	m := startManagerWith(t, func(mgr ctrl.Manager, c *controllers) { withWorkers(mgr, c); c.admission = true })
	defer m.stop()
	f.research.runRef("one", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/one")
	defer explainFleetOnFailure(t, f.ns, run.Name, workers)
	run = awaitPhase(t, run, taugridv1.PhaseRunning, 90*time.Second, "the run to run on a worker")
	if got := run.Status.Workload.Cluster; got != "large" {
		t.Fatalf("the run runs on cluster %q, want large (the small worker's own ClusterQueue has no GPUs)", got)
	}
	var pods corev1.PodList
	if err := workers["large"].List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{render.LabelRun: run.Name}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("worker large holds %d pods of the run (%v), want 1", len(pods.Items), err)
	}
	workerCheckSays(t, workers["large"], f.ns, run.Status.Workload.Name, f.plat.name, kueue.CheckStateReady,
		"dispatched by the manager cluster, where Job "+run.Status.Workload.Name+" was rendered for run "+run.Name)
	refusedOnTheWorker(t, workers["large"], f.ns)
	exitPodOn(t, workers["large"], &pods.Items[0], 0)
	waitFor(t, 60*time.Second, "the run to succeed once its pod on the worker exits 0", func() bool {
		return getRun(t, f.ns, run.Name).Status.Phase == taugridv1.PhaseSucceeded
	})
}

// explainFleetOnFailure logs, when t failed, what the run says and what
// each cluster's Kueue shows of its namespace: the workloads and their
// checks, and the workers' AdmissionChecks.
func explainFleetOnFailure(t *testing.T, ns, run string, workers map[string]client.Client) {
	if !t.Failed() {
		return
	}
	ctx := context.Background()
	r := &taugridv1.TauRun{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: run}, r); err == nil {
		t.Logf("run %s: %s: %s", run, r.Status.Phase, r.Status.Message)
	}
	all := map[string]client.Client{"manager": k8s}
	maps.Copy(all, workers)
	for name, c := range all {
		var wls kueue.WorkloadList
		_ = c.List(ctx, &wls, client.InNamespace(ns))
		for _, wl := range wls.Items {
			t.Logf("%s: workload %s, owners %v: %+v, checks %+v", name, wl.Name, wl.OwnerReferences, wl.Status.Conditions, wl.Status.AdmissionChecks)
		}
		var acs kueue.AdmissionCheckList
		_ = c.List(ctx, &acs)
		for _, ac := range acs.Items {
			t.Logf("%s: AdmissionCheck %s (%s): %+v", name, ac.Name, ac.Spec.ControllerName, ac.Status.Conditions)
		}
		var pods corev1.PodList
		_ = c.List(ctx, &pods, client.InNamespace(ns))
		for _, p := range pods.Items {
			t.Logf("%s: pod %s on %q: %s %+v %+v", name, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
	}
}

// refusedOnTheWorker: whoever may create Jobs in a tenant namespace of a
// worker, with the tenant's queue label, with or without MultiKueue's
// origin label, gets a workload the worker never admits, saying why.
func refusedOnTheWorker(t *testing.T, w client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{
		"by-hand": {"kueue.x-k8s.io/queue-name": "runs"},
		"forged":  {"kueue.x-k8s.io/queue-name": "runs", kueue.MultiKueueOriginLabel: "manager"},
	} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "miner", Image: "evil/miner",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			}}}},
		}}
		create(t, w, job)
	}
	for _, name := range []string{"by-hand", "forged"} {
		want := "created outside TauGrid: the manager cluster dispatched no workload job-" + name + "-"
		var wl *kueue.Workload
		waitFor(t, 60*time.Second, "the worker to refuse Job "+name, func() bool {
			var wls kueue.WorkloadList
			if err := w.List(ctx, &wls, client.InNamespace(ns)); err != nil {
				return false
			}
			for i := range wls.Items {
				if ref := metav1.GetControllerOf(&wls.Items[i]); ref != nil && ref.Name == name {
					wl = &wls.Items[i]
				}
			}
			return wl != nil && strings.Contains(wl.Annotations[taugridv1.AnnotationAdmissionRefusal], want)
		})
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			t.Errorf("worker admitted Job %s: %+v", name, wl.Status.Conditions)
		}
		var job batchv1.Job
		if err := w.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil || !ptr.Deref(job.Spec.Suspend, false) {
			t.Errorf("worker's Job %s: %v, suspend %v; want it never started", name, err, job.Spec.Suspend)
		}
	}
}

// workerCheckSays waits until the worker's workload of the named Job has
// TauGrid's check in state, saying want.
func workerCheckSays(t *testing.T, w client.Client, ns, job, platform string, state kueue.CheckState, want string) {
	t.Helper()
	check := kueue.AdmissionCheckReference(platformctrl.PolicyCheckName(platform))
	var last kueue.AdmissionCheckState
	waitFor(t, 30*time.Second, "the worker's check of Job "+job+" to be "+string(state), func() bool {
		var wls kueue.WorkloadList
		if err := w.List(context.Background(), &wls, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, wl := range wls.Items {
			if ref := metav1.GetControllerOf(&wl); ref == nil || ref.Name != job {
				continue
			}
			for _, st := range wl.Status.AdmissionChecks {
				if st.Name == check {
					last = st
				}
			}
		}
		return last.State == state && strings.Contains(last.Message, want)
	})
}

// tenantPVC is the example tenant's data volume, as a platform team
// provisions it in each cluster.
func tenantPVC(ns string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + "-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}
