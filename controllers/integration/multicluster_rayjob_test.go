package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	runctrl "github.com/taugrid/taugrid/controllers/run"
)

// A Ray run goes through the fleet as a Job does: Kueue's RayJob webhook
// gives the manager's RayJob spec.managedBy kueue.x-k8s.io/multikueue (no
// KubeRay runs in the manager, and none would touch it), MultiKueue copies
// it to the worker with room (the other has no GPU quota), whose KubeRay
// makes the Ray cluster; the run is Running once the worker's head and
// workers run, the runs API finds its head pod and diagnosis on the
// worker, and it succeeds when the worker's RayJob does (Kueue mirrors
// its status back).
func TestARayRunDispatchedThroughTheFleetRunsOnTheWorkerAndSucceeds(t *testing.T) {
	fl := ownFleet(t, controlplane.FleetOptions{Workers: []string{"cpu", "gpu"}, KubeRay: true})
	f := newRunFixture(t, "mr1")
	dispatchTenantTo(t, fl, f, "mr1-a", map[string]int64{"cpu": 0, "gpu": 16})
	ctx := context.Background()
	// In the manager the tenant borrows CPU and memory from its cohort;
	// a worker's queue stands alone, so it gets what the run needs.
	growQueue(t, workerClient(t, fl, "gpu"), "mr1-a", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("192"), corev1.ResourceMemory: resource.MustParse("2Ti")})
	for name := range map[string]bool{"cpu": true, "gpu": true} {
		if err := fl.Workers[name].AddNodes(ctx, controlplane.GPUNode("mr1-"+name+"-1"), controlplane.GPUNode("mr1-"+name+"-2")); err != nil {
			t.Fatal(err)
		}
	}
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := startManagerWith(t, withEvidence(t, st))
	defer m.stop()

	f.research.runRef("ray", "target: ray\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/ray")
	t.Cleanup(func() {
		if t.Failed() {
			logDispatch(t, f.ns, k8s)
			for name := range fl.Workers {
				t.Logf("worker %s:", name)
				logDispatch(t, f.ns, workerClient(t, fl, name))
			}
		}
	})
	run = awaitPhase(t, run, taugridv1.PhaseRunning, 120*time.Second, "the Ray run to run on a worker")
	if run.Status.Workload.Kind != "RayJob" || run.Status.Workload.Cluster != "gpu" {
		t.Fatalf("the run's workload is %+v, want a RayJob on worker gpu", run.Status.Workload)
	}
	key := client.ObjectKey{Namespace: f.ns, Name: run.Status.Workload.Name}
	local := &rayv1.RayJob{}
	if err := k8s.Get(ctx, key, local); err != nil || ptr.Deref(local.Spec.ManagedBy, "") != kueue.MultiKueueControllerName {
		t.Fatalf("the manager's RayJob: %v, managedBy %v; want %s", err, local.Spec.ManagedBy, kueue.MultiKueueControllerName)
	}
	if pods := podsOfRun(t, run); len(pods) != 0 {
		t.Errorf("the manager holds %d pods of the Ray run, want none", len(pods))
	}
	gpu := workerClient(t, fl, "gpu")
	var pods corev1.PodList
	if err := gpu.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{render.LabelRun: run.Name}); err != nil {
		t.Fatal(err)
	}
	roles := map[string]int{}
	var head *corev1.Pod
	for i, p := range pods.Items {
		roles[p.Labels[runctrl.RayNodeType]]++
		if p.Labels[runctrl.RayNodeType] == "head" {
			head = &pods.Items[i]
		}
	}
	if roles["head"] != 1 || roles["worker"] != 2 || head == nil {
		t.Fatalf("worker gpu holds Ray pods %v, want a head and 2 workers", roles)
	}
	onWorker := map[string]bool{}
	for _, p := range pods.Items {
		onWorker[p.Name] = true
	}
	api := &server.RunsAPI{Client: m.client, APIReader: k8s, Clusters: m.clusters}
	if got, err := api.AttemptPod(ctx, run); err != nil || got == nil || !onWorker[got.Name] {
		t.Errorf("the runs API's attempt pod: %v (%v), want one of the run's pods on the worker", got, err)
	}
	d, err := api.Diagnosis(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, p := range d.Pods {
		if onWorker[p.Name] {
			shown++
		}
	}
	if shown != len(pods.Items) || len(d.Pods) != shown || !d.Nodes[head.Spec.NodeName].Exists {
		t.Errorf("the diagnosis shows %d pods (%d of the worker's %d) and nodes %+v, want the worker's pods and the head's node %s",
			len(d.Pods), shown, len(pods.Items), d.Nodes, head.Spec.NodeName)
	}
	t.Logf("the diagnosis shows the worker's %d pods (Ray %v) and nodes %v", shown, roles, len(d.Nodes))

	// MultiKueue deletes the worker's RayJob once the manager's Workload
	// finishes; the run reconciler holds it, and so its submitter Job and
	// pod, until the bundle is sealed.
	waitFor(t, 30*time.Second, "the worker's RayJob to be held for the evidence", func() bool {
		rj := &rayv1.RayJob{}
		return gpu.Get(ctx, key, rj) == nil && slices.Contains(rj.Finalizers, taugridv1.FinalizerEvidence)
	})

	// No Ray dashboard answers in the worker: unless KubeRay has seen
	// the job end already (the submitter Job's pod ends on its own under
	// kwok), report its end there as KubeRay would, on the latest copy.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rj := &rayv1.RayJob{}
		if err := gpu.Get(ctx, key, rj); err != nil || rj.Status.JobStatus == rayv1.JobStatusSucceeded {
			return err
		}
		rj.Status.JobDeploymentStatus, rj.Status.JobStatus = rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded
		return gpu.Status().Update(ctx, rj)
	})
	if err != nil {
		t.Fatal(err)
	}
	run = awaitPhase(t, run, taugridv1.PhaseSucceeded, 60*time.Second, "the Ray run to succeed once the worker's RayJob does")
	if a := run.Status.Attempts[0]; a.Cluster != "gpu" {
		t.Errorf("the attempt records cluster %q, want gpu", a.Cluster)
	}
	ekey := evidence.Key{Namespace: f.ns, Run: run.Name, Attempt: 1}
	waitFor(t, 90*time.Second, "the Ray run's bundle to be sealed", func() bool {
		has, _ := evidence.Has(ctx, st, ekey)
		return has
	})
	rec := sealedRecord(t, st, ekey)
	if a := rec.Attempts[0]; a.Cluster != "gpu" {
		t.Errorf("the bundle's attempt names cluster %q, want gpu", a.Cluster)
	}
	var inBundle []string
	for _, p := range rec.Pods {
		if onWorker[p.Name] {
			inBundle = append(inBundle, p.Name)
		}
	}
	if len(inBundle) == 0 {
		t.Errorf("the bundle holds none of the worker's pods of the run (it holds %+v)", rec.Pods)
	}
	waitFor(t, 30*time.Second, "the sealed attempt's RayJob to go from the worker once released", func() bool {
		return apierrors.IsNotFound(gpu.Get(ctx, key, &rayv1.RayJob{}))
	})
	t.Logf("the bundle holds the worker's pods %v", inBundle)
}

// logDispatch logs the Workloads and RayJobs of namespace ns in a
// cluster, for a test that failed.
func logDispatch(t *testing.T, ns string, c client.Client) {
	var wls kueue.WorkloadList
	var rjs rayv1.RayJobList
	_ = c.List(context.Background(), &wls, client.InNamespace(ns))
	_ = c.List(context.Background(), &rjs, client.InNamespace(ns))
	for _, wl := range wls.Items {
		t.Logf("Workload %s: cluster %v, conditions %+v, checks %+v", wl.Name, wl.Status.ClusterName, wl.Status.Conditions, wl.Status.AdmissionChecks)
	}
	for _, rj := range rjs.Items {
		t.Logf("RayJob %s: managedBy %v, suspend %v, status %+v", rj.Name, rj.Spec.ManagedBy, rj.Spec.Suspend, rj.Status)
	}
}

// growQueue sets the nominal quota of resources in ClusterQueue cq's
// first flavor.
func growQueue(t *testing.T, c client.Client, cq string, quota corev1.ResourceList) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q := &kueue.ClusterQueue{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: cq}, q); err != nil {
			return err
		}
		for i := range q.Spec.ResourceGroups[0].Flavors[0].Resources {
			r := &q.Spec.ResourceGroups[0].Flavors[0].Resources[i]
			if v, ok := quota[r.Name]; ok {
				r.NominalQuota = v
			}
		}
		return c.Update(context.Background(), q)
	})
	if err != nil {
		t.Fatal(err)
	}
}
