package integration

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/shared"
)

// jobEnv is the main container's environment of a run's attempt.
func jobEnv(t testing.TB, ns, run string, attempt int) (*batchv1.Job, map[string]string) {
	t.Helper()
	j := &batchv1.Job{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: render.WorkloadName(run, attempt)}, j); err != nil {
		t.Fatalf("attempt %d's Job: %v", attempt, err)
	}
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return j, env
}

// A low-priority run that Kueue preempts for a high-priority one ends its
// attempt as Preempted, naming the preemptor; the next attempt is a new Job
// that resumes from the run's latest checkpoint.
func TestAPreemptedAttemptIsRetriedAndResumesFromItsCheckpoint(t *testing.T) {
	f := newRunFixture(t, "rc1")
	clk := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	ctx := context.Background()
	// The low run fills the team's 16 GPUs (8 its own, 8 borrowed); the
	// high one needs 8 more, which only preemption can give it.
	pvc := "  storage.data_pvc: rc1-a-data\n"
	f.research.runRef("low", "target: ddp\noverrides:\n  policy.priority: low\n  resilience.max_retries: \"2\"\n"+pvc)
	f.research.runRef("high", "target: ddp\noverrides:\n  policy.priority: high\n  compute.nodes: \"1\"\n"+pvc)
	f.poll(t)
	low, high := f.runOf(t, "refs/tau/runs/low"), f.runOf(t, "refs/tau/runs/high")
	f.reconcileRun(t, low.Name, taugridv1.PhaseAdmitted)
	startPods(t, f.ns, render.WorkloadName(low.Name, 1))
	f.reconcileRun(t, low.Name, taugridv1.PhaseRunning)
	clk.SetTime(clk.Now().Add(10 * time.Minute)) // it trains for ten minutes
	f.reconcileRun(t, high.Name, taugridv1.PhaseQueued)

	// Kueue evicts the low run to admit the high one.
	waiting := f.reconcileRun(t, low.Name, taugridv1.PhasePending)
	want := "retrying in 30s (attempt 2 of 3) after failed (Preempted): preempted by run " + f.ns + "/" + high.Name
	if !strings.HasPrefix(waiting.Status.Message, want) {
		t.Fatalf("message = %q, want it to start with %q", waiting.Status.Message, want)
	}
	t.Logf("preempted run: %s", waiting.Status.Message)
	if a := waiting.Status.Attempts[0]; a.FailureClass != "Preempted" || a.EndTime == nil || !strings.Contains(a.Reason, high.Name) ||
		!strings.Contains(a.Reason, ", after 10m") || !strings.HasSuffix(a.Reason, "s of running (work since its last checkpoint is lost)") { // times are kept to the second
		t.Errorf("attempt 1 = %+v, want Preempted by %s with an end time", a, high.Name)
	}
	// The preempted Job is gone, so Kueue cannot requeue it behind TauGrid's back.
	err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: render.WorkloadName(low.Name, 1)}, &batchv1.Job{})
	if !apierrors.IsNotFound(err) {
		j := &batchv1.Job{}
		_ = k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: render.WorkloadName(low.Name, 1)}, j)
		if j.DeletionTimestamp.IsZero() {
			t.Errorf("the preempted Job still exists: %v", err)
		}
	}
	f.reconcileRun(t, high.Name, taugridv1.PhaseAdmitted)

	clk.SetTime(clk.Now().Add(31 * time.Second))
	f.reconcileRun(t, low.Name, taugridv1.PhaseQueued)
	j, env := jobEnv(t, f.ns, low.Name, 2)
	wantEnv := map[string]string{"TAU_ATTEMPT": "2", "TAU_RETRY_REASON": "Preempted", "TAU_RESUME_FROM": render.ResumeLink,
		"TAU_CHECKPOINT_DIR": "/data/ddp/ckpt/" + low.Name}
	for k, v := range wantEnv {
		if env[k] != v {
			t.Errorf("attempt 2: %s=%q, want %q", k, env[k], v)
		}
	}
	if g := j.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("termination grace = %v, want 30s", g)
	}
}

// An OOM is the researcher's to fix: not retried unless the tau file lists
// it.
func TestAnOOMIsRetriedOnlyWhenListed(t *testing.T) {
	f := newRunFixture(t, "rc2")
	f.research.write("tau/oom-ok.yaml", strings.Replace(readExample(t, "tau.yaml"),
		"retry_on: [Preempted, NodeLost, GPUFault]", "retry_on: [OOMKilled]", 1))
	f.research.commit("retry OOMs")
	f.research.runRef("default", "target: default\n")
	f.research.runRef("listed", "target: oom-ok\n")
	f.poll(t)
	if err := k8s.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rc2-node"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref   string
		phase taugridv1.RunPhase
		msg   string
	}{
		{"refs/tau/runs/default", taugridv1.PhaseFailed, "failed (OOMKilled): container main ran out of memory"},
		{"refs/tau/runs/listed", taugridv1.PhasePending, "retrying in 30s (attempt 2 of 3) after failed (OOMKilled)"},
	} {
		run := f.runOf(t, tc.ref)
		f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
		oomPod(t, f.ns, run.Name, 1, "rc2-node")
		failJob(t, f.ns, render.WorkloadName(run.Name, 1))
		got := f.reconcileRun(t, run.Name, tc.phase)
		if !strings.HasPrefix(got.Status.Message, tc.msg) {
			t.Errorf("%s: message = %q, want %q", tc.ref, got.Status.Message, tc.msg)
		}
	}
}

// Backoff doubles between attempts, attempts stop at the cap, and a
// controller restarted in the middle of a backoff neither loses the retry
// nor submits it twice.
func TestRetriesBackOffStopAtTheCapAndSurviveARestart(t *testing.T) {
	f := newRunFixture(t, "rc3")
	clk := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	ctx := context.Background()
	f.research.runRef("flaky", "target: default\n") // max_retries: 2
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/flaky")
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: run.Name}}

	waits := []time.Duration{30 * time.Second, time.Minute}
	for i, wait := range waits {
		attempt := i + 1
		f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
		exitedPod(t, f.ns, run.Name, attempt, "rc3-gone", 1) // its node is gone
		failJob(t, f.ns, render.WorkloadName(run.Name, attempt))
		got := f.reconcileRun(t, run.Name, taugridv1.PhasePending)
		if want := "retrying in " + wait.String(); !strings.HasPrefix(got.Status.Message, want) {
			t.Fatalf("after attempt %d: message = %q, want %q", attempt, got.Status.Message, want)
		}

		// A new controller, with nothing carried over, halfway through the wait.
		f.runRec = &runctrl.RunReconciler{Client: cacheLike{k8s}, APIReader: k8s, Scheme: scheme, Files: f.runRec.Files, Policies: f.runRec.Policies,
			Clock: clk, Recorder: events.NewFakeRecorder(100)}
		clk.SetTime(clk.Now().Add(wait / 2))
		for range 3 {
			if _, err := f.runRec.Reconcile(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(f.jobs(t)); n != attempt {
			t.Fatalf("%d Jobs halfway through the backoff after attempt %d, want %d", n, attempt, attempt)
		}
		clk.SetTime(clk.Now().Add(wait/2 + time.Second))
		for range 3 {
			if _, err := f.runRec.Reconcile(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(f.jobs(t)); n != attempt+1 {
			t.Fatalf("%d Jobs after the backoff after attempt %d, want %d", n, attempt, attempt+1)
		}
	}
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	exitedPod(t, f.ns, run.Name, 3, "rc3-gone", 1)
	failJob(t, f.ns, render.WorkloadName(run.Name, 3))
	failed := f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	if n := len(failed.Status.Attempts); n != 3 {
		t.Errorf("%d attempts recorded, want 3", n)
	}
	if !strings.HasPrefix(failed.Status.Message, "failed (NodeLost): node rc3-gone is gone") {
		t.Errorf("message = %q", failed.Status.Message)
	}
}

// oomPod records a pod of an attempt whose main container ran out of memory.
func oomPod(t testing.TB, ns, run string, attempt int, node string) {
	t.Helper()
	exitedPod(t, ns, run, attempt, node, 137)
	pod := &corev1.Pod{}
	name := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("%s-%d-abcde", run, attempt)}
	if err := k8s.Get(context.Background(), name, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

func readExample(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/research/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A failed run resumes on request, once per request: a new attempt from its
// latest checkpoint, whatever the retry policy said.
func TestAFailedRunResumesOncePerRequest(t *testing.T) {
	f := newRunFixture(t, "rc4")
	ctx := context.Background()
	f.research.runRef("bug", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/bug")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rc4-node"}}); err != nil {
		t.Fatal(err)
	}
	exitedPod(t, f.ns, run.Name, 1, "rc4-node", 1)
	failJob(t, f.ns, render.WorkloadName(run.Name, 1))
	failed := f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)

	resume := func(v string) {
		patch := client.MergeFrom(failed.DeepCopy())
		failed.Annotations = map[string]string{taugridv1.AnnotationResume: v}
		if err := k8s.Patch(ctx, failed, patch); err != nil {
			t.Fatal(err)
		}
	}
	resume("2026-11-30T10:00:00Z")
	resumed := f.reconcileRun(t, run.Name, taugridv1.PhaseQueued)
	if resumed.Status.LastHandledResume != "2026-11-30T10:00:00Z" || len(resumed.Status.Attempts) != 2 {
		t.Fatalf("status = %+v, want attempt 2 and the request handled", resumed.Status)
	}
	if apimeta.FindStatusCondition(resumed.Status.Conditions, taugridv1.ConditionStalled) != nil {
		t.Errorf("a resumed run is still Stalled")
	}
	// This tau file keeps no checkpoints, so there is nothing to resume from.
	if _, env := jobEnv(t, f.ns, run.Name, 2); env["TAU_ATTEMPT"] != "2" || env["TAU_RETRY_REASON"] != "UserError" || env["TAU_RESUME_FROM"] != "" {
		t.Errorf("attempt 2: TAU_ATTEMPT=%q TAU_RETRY_REASON=%q TAU_RESUME_FROM=%q", env["TAU_ATTEMPT"], env["TAU_RETRY_REASON"], env["TAU_RESUME_FROM"])
	}

	// Attempt 2 fails too; the same request does not resume it again.
	exitedPod(t, f.ns, run.Name, 2, "rc4-node", 1)
	failJob(t, f.ns, render.WorkloadName(run.Name, 2))
	failed = f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	for range 3 {
		if _, err := f.runRec.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(failed)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.jobs(t)); n != 2 {
		t.Errorf("%d Jobs, want 2: a handled request resumed again", n)
	}
}

// startPods stands in for the Job controller and the kubelet of a cluster
// this package's control plane does not run (startup_cluster_test.go runs
// the real ones): every pod of the Job runs, and the Job says so.
func startPods(t testing.TB, ns, job string) {
	t.Helper()
	ctx := context.Background()
	j := &batchv1.Job{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: job}, j); err != nil {
		t.Fatal(err)
	}
	n := ptr.Deref(j.Spec.Parallelism, 1)
	for i := range n {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", job, i), Namespace: ns, Labels: j.Spec.Template.Labels},
			Spec: *j.Spec.Template.Spec.DeepCopy()}
		pod.Spec.NodeName = fmt.Sprintf("gpu-%d", i+1)
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodRunning
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}})
		}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	setJobStatus(t, ns, job, "starting", func(st *batchv1.JobStatus) {
		now := metav1.Now()
		st.StartTime, st.Active, st.Ready = &now, n, ptr.To(n)
	})
}

// rayPods are the pods KubeRay made for a run's attempt that still hold
// something: not terminated, not being deleted.
func rayPods(t testing.TB, ns, run string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{render.LabelRun: run}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return shared.PodTerminated(&p) || !p.DeletionTimestamp.IsZero() })
}

// admitRayRun takes a Ray run to Admitted and waits until KubeRay has made
// its cluster's head and workers.
func admitRayRun(t *testing.T, f *runFixture, ref string) *taugridv1.TauRun {
	t.Helper()
	run := f.runOf(t, ref)
	admitted := f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	waitFor(t, 60*time.Second, "KubeRay to make the Ray cluster's pods", func() bool { return len(rayPods(t, f.ns, run.Name)) >= 3 })
	return admitted
}

// A Ray run that ends, however it ends, frees its Ray cluster and every pod
// at once, although no garbage collector runs here; the RayJob stays for
// the record, without pods, for the platform's ttl_after_finished.
func TestAnEndedRayRunHoldsNoPods(t *testing.T) {
	f := newRunFixture(t, "rr1")
	clk := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	ctx := context.Background()
	f.research.runRef("fails", "target: ray\noverrides:\n  resilience.max_retries: \"0\"\n")
	f.research.runRef("cancelled", "target: ray\n")
	f.poll(t)

	failed := admitRayRun(t, f, "refs/tau/runs/fails")
	rj := &rayv1.RayJob{}
	key := types.NamespacedName{Namespace: f.ns, Name: failed.Status.Workload.Name}
	ended := time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // KubeRay writes this status too
		if err := k8s.Get(ctx, key, rj); err != nil {
			return err
		}
		now := metav1.NewTime(clk.Now())
		rj.Status.JobDeploymentStatus, rj.Status.JobStatus, rj.Status.EndTime = rayv1.JobDeploymentStatusFailed, rayv1.JobStatusFailed, &now
		rj.Status.Message = "exit code 1"
		return k8s.Status().Update(ctx, rj)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.reconcileRun(t, failed.Name, taugridv1.PhaseFailed)
	waitFor(t, 60*time.Second, "the failed Ray run's pods to go", func() bool { return len(rayPods(t, f.ns, failed.Name)) == 0 })
	t.Logf("failed Ray run: last pod gone %s after the RayJob ended", time.Since(ended).Round(time.Millisecond))
	var clusters rayv1.RayClusterList
	if err := k8s.List(ctx, &clusters, client.InNamespace(f.ns), client.MatchingLabels{render.LabelRun: failed.Name}); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters.Items {
		if c.DeletionTimestamp.IsZero() {
			t.Errorf("RayCluster %s of the failed run is still there", c.Name)
		}
	}
	if err := k8s.Get(ctx, key, rj); err != nil {
		t.Fatalf("the ended RayJob, kept for the record: %v", err)
	}
	// The record goes after ttl_after_finished (24h), not before.
	clk.SetTime(clk.Now().Add(23 * time.Hour))
	res, err := f.runRec.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: failed.Name}})
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > time.Hour {
		t.Errorf("23h after the end: %+v %v, want a look again within the hour left", res, err)
	}
	if deleted(t, rj.DeepCopy()) {
		t.Errorf("the RayJob went before ttl_after_finished")
	}
	clk.SetTime(clk.Now().Add(time.Hour))
	if _, err := f.runRec.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: failed.Name}}); err != nil {
		t.Fatal(err)
	}
	if !deleted(t, rj.DeepCopy()) {
		t.Errorf("the RayJob is still kept after ttl_after_finished")
	}

	cancelled := admitRayRun(t, f, "refs/tau/runs/cancelled")
	patch := client.MergeFrom(cancelled.DeepCopy())
	cancelled.Spec.Cancel = true
	if err := k8s.Patch(ctx, cancelled, patch); err != nil {
		t.Fatal(err)
	}
	ended = time.Now()
	f.reconcileRun(t, cancelled.Name, taugridv1.PhaseCancelled)
	if n := len(rayPods(t, f.ns, cancelled.Name)); n != 0 {
		t.Errorf("%d pods of the cancelled Ray run hold on", n)
	}
	t.Logf("cancelled Ray run: last pod gone %s after the cancellation", time.Since(ended).Round(time.Millisecond))
}

// laggingCache answers Gets of one object with an old copy of it, as a
// manager's cache does just after the reconciler's own status patch.
type laggingCache struct {
	client.Client
	old client.Object
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if reflect.TypeOf(obj) == reflect.TypeOf(c.old) && key == client.ObjectKeyFromObject(c.old) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(c.old.DeepCopyObject()).Elem())
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// The orders in which a reconcile can come to see a preempted attempt.
var preemptionOrders = []string{
	"the eviction seen first",
	"the job's deletion seen before any look at the eviction",
	"the job's deletion seen after the eviction was recorded",
	"a cache that still shows the attempt going on after TauGrid ended it",
}

// A preempted attempt is classified Preempted and retried, every time,
// Job and Ray runs alike, whatever the order in which the Workload's
// eviction and the job's deletion are seen; and its pods are gone. Each
// of the 8 pairs of target and order is tried twice (50 tries in all
// made it a fifth of the integration package's time).
func TestAPreemptedAttemptIsRetriedWhateverTheOrder(t *testing.T) {
	f := newRunFixture(t, "rc5")
	ctx := context.Background()
	const reps = 2 * 2 * 4 // twice each target (ddp, ray) in each order
	// Room for every repetition's events: a full fake recorder blocks.
	f.runRec.Recorder, f.repos.Recorder = events.NewFakeRecorder(100000), events.NewFakeRecorder(100000)
	targets := []string{"ddp", "ray"}
	retried := 0
	for i := range reps {
		pvc := "  storage.data_pvc: rc5-a-data\n"
		lowPVC := pvc
		if targets[i%2] == "ray" {
			lowPVC = ""
		}
		f.research.runRef(fmt.Sprintf("low-%d", i), "target: "+targets[i%2]+"\noverrides:\n  policy.priority: low\n  resilience.max_retries: \"2\"\n"+lowPVC)
		f.research.runRef(fmt.Sprintf("high-%d", i), "target: ddp\noverrides:\n  policy.priority: high\n  compute.nodes: \"1\"\n"+pvc)
		f.poll(t)
		order := preemptionOrders[(i/2)%len(preemptionOrders)]
		low, high := f.runOf(t, fmt.Sprintf("refs/tau/runs/low-%d", i)), f.runOf(t, fmt.Sprintf("refs/tau/runs/high-%d", i))
		admitted := f.reconcileRun(t, low.Name, taugridv1.PhaseAdmitted)
		f.reconcileRun(t, high.Name, taugridv1.PhaseQueued)
		key := types.NamespacedName{Namespace: f.ns, Name: low.Name}
		var job client.Object = &batchv1.Job{}
		if admitted.Status.Workload.Kind == "RayJob" {
			job = &rayv1.RayJob{}
		}
		job.SetNamespace(f.ns)
		job.SetName(admitted.Status.Workload.Name)
		deleteJob := func() {
			if err := k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 30*time.Second, "Kueue to preempt "+low.Name, func() bool {
			wl, err := f.runRec.WorkloadOwnedBy(ctx, f.ns, admitted.Status.Workload.Name)
			return err == nil && runctrl.PreemptionOf(wl, time.Time{}) != nil
		})
		switch order {
		case preemptionOrders[1]:
			deleteJob()
		case preemptionOrders[2], preemptionOrders[3]:
			if _, err := f.runRec.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			if order == preemptionOrders[2] {
				deleteJob()
			}
		}
		recorded := &taugridv1.TauRun{}
		if err := k8s.Get(ctx, key, recorded); err != nil {
			t.Fatal(err)
		}
		got := f.reconcileRun(t, low.Name, taugridv1.PhasePending)
		if order == preemptionOrders[3] {
			if a := recorded.Status.Attempts[0]; a.Preemption == nil || a.EndTime != nil {
				t.Fatalf("rep %d: after one look, attempt 1 = %+v, want its preemption recorded and nothing more", i, a)
			}
			stale := *f.runRec
			stale.Client, stale.APIReader = laggingCache{Client: k8s, old: recorded}, k8s
			for range 3 {
				if _, err := stale.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
			}
			if err := k8s.Get(ctx, key, got); err != nil {
				t.Fatal(err)
			}
		}
		want := "after failed (Preempted): preempted by run " + f.ns + "/" + high.Name
		a := got.Status.Attempts[0]
		switch {
		case got.Status.Phase != taugridv1.PhasePending || !strings.Contains(got.Status.Message, want):
			t.Errorf("rep %d (%s, %s): %s %q, want Pending, retrying %s", i, targets[i%2], order, got.Status.Phase, got.Status.Message, want)
		case len(got.Status.Attempts) != 1 || a.FailureClass != string(taugridv1.FailurePreempted) || a.Preemption == nil || a.EndTime == nil:
			t.Errorf("rep %d (%s, %s): attempts %+v, want one, Preempted, with its preemption recorded", i, targets[i%2], order, got.Status.Attempts)
		default:
			retried++
		}
		waitFor(t, 30*time.Second, "the preempted attempt's pods to go", func() bool { return len(rayPods(t, f.ns, low.Name)) == 0 })
		for _, run := range []*taugridv1.TauRun{low, high} { // free the quota for the next repetition
			patch := client.MergeFrom(run.DeepCopy())
			run.Spec.Cancel = true
			if err := k8s.Patch(ctx, run, patch); err != nil {
				t.Fatal(err)
			}
			f.reconcileRun(t, run.Name, taugridv1.PhaseCancelled)
		}
	}
	t.Logf("%d of %d preempted attempts classified Preempted and retried", retried, reps)
}
