package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// reconcileUntil drives the run reconciler until the run's message
// satisfies ok, or fails after 20 s.
func (f *runFixture) reconcileUntil(t *testing.T, name string, phase taugridv1.RunPhase, ok func(*taugridv1.TauRun) bool) *taugridv1.TauRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		run := f.reconcileRun(t, name, phase)
		if ok(run) {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %q", name, run.Status.Message)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func gone(t *testing.T, ns, name string) bool {
	t.Helper()
	j := &batchv1.Job{}
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, j)
	return apierrors.IsNotFound(err) || err == nil && !j.DeletionTimestamp.IsZero()
}

// A run the queue could never hold is refused before anything is submitted,
// with the tau file's line.
func TestAnInfeasibleRunIsRefusedWithItsLineAndSubmitsNothing(t *testing.T) {
	f := newRunFixture(t, "rq1")
	setGPUQuota(t, f.ns, "4", "0")
	f.research.runRef("big", "target: ddp\noverrides:\n  storage.data_pvc: rq1-a-data\n")
	f.poll(t)
	run := f.reconcileRun(t, f.runOf(t, "refs/tau/runs/big").Name, taugridv1.PhaseFailed)
	want := "tau/ddp.yaml:12:9: compute.gpus: the run asks 16 nvidia.com/gpu in all, more than ClusterQueue rq1-a can ever hold (4, nominal quota plus borrowing limit): it could never be admitted"
	if run.Status.Message != want {
		t.Errorf("message = %q\nwant      %q", run.Status.Message, want)
	}
	if n := len(f.jobs(t)); n != 0 {
		t.Errorf("%d Jobs submitted for an infeasible run", n)
	}
}

// Runs waiting behind others say where they are, behind whom, and what
// they need; a higher priority goes first, whenever it was pushed.
func TestAWaitingRunSaysItsPlaceWhoIsAheadAndWhatItNeeds(t *testing.T) {
	f := newRunFixture(t, "rq2")
	setGPUQuota(t, f.ns, "1", "0")
	f.research.runRef("first", "target: default\n")
	f.poll(t)
	first := f.runOf(t, "refs/tau/runs/first")
	f.reconcileRun(t, first.Name, taugridv1.PhaseAdmitted)
	// The first's Job started now; its time limit (2h) bounds the wait.
	started := metav1.NewTime(time.Now().Truncate(time.Second))
	setJobStatus(t, f.ns, render.WorkloadName(first.Name, 1), "starting", func(st *batchv1.JobStatus) { st.StartTime = &started })
	// Neither may preempt the first: low is below it, normal equal to it.
	f.research.runRef("later", "target: default\noverrides:\n  policy.priority: low\n")
	f.research.runRef("sooner", "target: default\n")
	f.poll(t)
	later, sooner := f.runOf(t, "refs/tau/runs/later"), f.runOf(t, "refs/tau/runs/sooner")
	f.reconcileRun(t, sooner.Name, taugridv1.PhaseQueued)
	// The first ends by its limit, then the sooner runs its 2 hours: the
	// later starts 4 hours after the first did, at the latest.
	want := "queued #2 of 2 in rq2-a: needs 1 more nvidia.com/gpu (rq2-h200); rq2-a uses 1/1 (no borrowing); starts about " +
		started.Add(4*time.Hour).Round(time.Minute).UTC().Format("15:04") + " UTC"
	queued := f.reconcileUntil(t, later.Name, taugridv1.PhaseQueued, func(r *taugridv1.TauRun) bool { return r.Status.Message == want })
	if long := queued.Status.Workload.Reason; !strings.Contains(long, "Ahead: rq2-a/run "+sooner.Name+" (priority 1000)") ||
		!strings.Contains(long, "nvidia.com/gpu   nominal 1      borrowing limit 0         in use 1") {
		t.Errorf("the explanation lacks who is ahead or the quota table:\n%s", long)
	}
	if !strings.Contains(queued.Status.Workload.Reason, "Estimate: starts about "+started.Add(4*time.Hour).Round(time.Minute).UTC().Format("2006-01-02 15:04 UTC")) {
		t.Errorf("the explanation lacks the start estimate:\n%s", queued.Status.Workload.Reason)
	}
	f.reconcileUntil(t, sooner.Name, taugridv1.PhaseQueued, func(r *taugridv1.TauRun) bool {
		return strings.HasPrefix(r.Status.Message, "queued #1 of 2 in rq2-a") &&
			strings.HasSuffix(r.Status.Message, "starts about "+started.Add(2*time.Hour).Round(time.Minute).UTC().Format("15:04")+" UTC")
	})

	// tau queue: the quota, then the runs holding it, then those waiting, in order.
	rep, err := runs.ReportQueue(context.Background(), k8s, f.ns)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range rep.Runs {
		order = append(order, r.Run)
	}
	if want := []string{first.Name, sooner.Name, later.Name}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("queue order %v, want %v", order, want)
	}
	if len(rep.Queues) != 1 || len(rep.Queues[0].Quota) == 0 {
		t.Fatalf("queues = %+v", rep.Queues)
	}
	for _, q := range rep.Queues[0].Quota {
		if q.Resource == "nvidia.com/gpu" && (q.Nominal != "1" || q.InUse != "1" || q.BorrowingLimit != "0") {
			t.Errorf("GPU quota = %+v, want 1 nominal, 1 in use, no borrowing", q)
		}
	}
}

// A run that borrowed from its cohort shows it; the next one waits on it.
func TestBorrowingIsShownInTheWait(t *testing.T) {
	f := newRunFixture(t, "rq3")
	f.research.runRef("wide", "target: ddp\noverrides:\n  storage.data_pvc: rq3-a-data\n") // 16 GPUs: 8 own, 8 borrowed
	f.research.runRef("next", "target: default\n")
	f.poll(t)
	f.reconcileRun(t, f.runOf(t, "refs/tau/runs/wide").Name, taugridv1.PhaseAdmitted)
	next := f.reconcileUntil(t, f.runOf(t, "refs/tau/runs/next").Name, taugridv1.PhaseQueued, func(r *taugridv1.TauRun) bool {
		return strings.Contains(r.Status.Message, "borrowed")
	})
	// It starts once the wide run, which holds all 16, ends by its limit.
	if want := regexp.MustCompile(`rq3-a uses 16/8 \(8 borrowed\); starts about \d\d:\d\d UTC$`); !want.MatchString(next.Status.Message) {
		t.Errorf("message = %q, want it to match %s", next.Status.Message, want)
	}
}

// A ClusterQueue with an admission check: quota is reserved, and the run
// says which check it waits for.
func TestAPendingAdmissionCheckIsNamed(t *testing.T) {
	f := newRunFixture(t, "rq4")
	ctx := context.Background()
	ac := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "rq4-budget"}, Spec: kueue.AdmissionCheckSpec{ControllerName: "example.com/budget"}}
	if err := k8s.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	// What the check's own controller would say: it is active.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ac), ac); err != nil {
			return err
		}
		ac.Status.Conditions = []metav1.Condition{{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", Message: "ready", LastTransitionTime: metav1.Now()}}
		return k8s.Status().Update(ctx, ac)
	})
	if err != nil {
		t.Fatal(err)
	}
	cq := &kueue.ClusterQueue{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: f.ns}, cq); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cq.DeepCopy())
	cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: "rq4-budget"}}}
	if err := k8s.Patch(ctx, cq, patch); err != nil {
		t.Fatal(err)
	}
	f.research.runRef("checked", "target: default\n")
	f.poll(t)
	run := f.reconcileUntil(t, f.runOf(t, "refs/tau/runs/checked").Name, taugridv1.PhaseQueued, func(r *taugridv1.TauRun) bool {
		return strings.HasPrefix(r.Status.Message, "quota reserved")
	})
	if want := "quota reserved in rq4-a; waiting for admission checks: rq4-budget"; run.Status.Message != want {
		t.Errorf("message = %q, want %q", run.Status.Message, want)
	}
}

// limits.max_queue_time ends a run that waits too long, with the reason it
// waited, and takes it out of the queue.
func TestMaxQueueTimeEndsARunThatWaitsTooLong(t *testing.T) {
	f := newRunFixture(t, "rq5")
	clk := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	setGPUQuota(t, f.ns, "1", "0")
	f.research.runRef("first", "target: default\n")
	f.research.runRef("impatient", "target: default\noverrides:\n  limits.max_queue_time: 1m\n")
	f.poll(t)
	f.reconcileRun(t, f.runOf(t, "refs/tau/runs/first").Name, taugridv1.PhaseAdmitted)
	run := f.runOf(t, "refs/tau/runs/impatient")
	f.reconcileUntil(t, run.Name, taugridv1.PhaseQueued, func(r *taugridv1.TauRun) bool { return strings.Contains(r.Status.Message, "needs 1 more") })
	clk.SetTime(clk.Now().Add(61 * time.Second))
	failed := f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	// Phase times are stored to the second, so the wait reads 1m1s or 1m2s.
	if want := " in the queue, the limit (limits.max_queue_time) is 1m0s: queued #1 of 1 in rq5-a: needs 1 more nvidia.com/gpu"; !strings.HasPrefix(failed.Status.Message, "waited 1m") ||
		!strings.Contains(failed.Status.Message, want) {
		t.Errorf("message = %q, want %q…", failed.Status.Message, want)
	}
	if !gone(t, f.ns, render.WorkloadName(run.Name, 1)) {
		t.Errorf("the run's Job still waits in the queue")
	}
}

// limits.max_preemptions: 0 fails a run at its first preemption instead of
// retrying it.
func TestMaxPreemptionsFailsARunInsteadOfRequeueingIt(t *testing.T) {
	f := newRunFixture(t, "rq6")
	pvc := "  storage.data_pvc: rq6-a-data\n"
	f.research.runRef("ci", "target: ddp\noverrides:\n  policy.priority: low\n  resilience.max_retries: \"2\"\n  limits.max_preemptions: \"0\"\n"+pvc)
	f.research.runRef("boss", "target: ddp\noverrides:\n  policy.priority: high\n  compute.nodes: \"1\"\n"+pvc)
	f.poll(t)
	ci, boss := f.runOf(t, "refs/tau/runs/ci"), f.runOf(t, "refs/tau/runs/boss")
	f.reconcileRun(t, ci.Name, taugridv1.PhaseAdmitted)
	f.reconcileRun(t, boss.Name, taugridv1.PhaseQueued)
	failed := f.reconcileRun(t, ci.Name, taugridv1.PhaseFailed)
	if want := "; preempted 1 time(s), more than limits.max_preemptions (0)"; !strings.HasSuffix(failed.Status.Message, want) ||
		!strings.HasPrefix(failed.Status.Message, "failed (Preempted): preempted by run "+f.ns+"/"+boss.Name) {
		t.Errorf("message = %q", failed.Status.Message)
	}
}

// An admitted run whose image never pulls fails at the platform's start
// deadline with the pull error, and gives its quota back.
func TestAnImageThatNeverPullsFailsAtTheStartDeadlineAndFreesItsQuota(t *testing.T) {
	f := newRunFixture(t, "rq7")
	clk := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	ctx := context.Background()
	f.research.runRef("typo", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/typo")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: run.Name + "-1-pull", Namespace: f.ns, Labels: map[string]string{render.LabelRun: run.Name, render.LabelAttempt: "1"}},
		Spec:       corev1.PodSpec{NodeName: "rq7-node", Containers: []corev1.Container{{Name: "main", Image: "python:3.12-slimm"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ImagePullBackOff", Message: `Back-off pulling image "python:3.12-slimm": not found`}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted) // within the deadline: still starting
	clk.SetTime(clk.Now().Add(10*time.Minute + time.Second))
	failed := f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	want := `failed (ImagePull): not running within the platform's start deadline: ImagePullBackOff: Back-off pulling image "python:3.12-slimm": not found`
	if failed.Status.Message != want {
		t.Errorf("message = %q\nwant      %q", failed.Status.Message, want)
	}
	if !gone(t, f.ns, render.WorkloadName(run.Name, 1)) {
		t.Errorf("the failed run still holds its Job and quota")
	}
}

// A run's place counts every Workload waiting on its ClusterQueue, whatever
// namespace's LocalQueue it came through, and none waiting on another.
func TestAQueuedRunsPlaceCountsEveryNamespaceFeedingItsClusterQueue(t *testing.T) {
	f := newRunFixture(t, "rq9")
	ctx := context.Background()
	other := "rq9-b"
	setGPUQuota(t, f.ns, "1", "0")
	setGPUQuota(t, other, "0", "0")
	f.research.runRef("first", "target: default\n")
	f.poll(t)
	f.reconcileRun(t, f.runOf(t, "refs/tau/runs/first").Name, taugridv1.PhaseAdmitted)

	shared := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: other},
		Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(f.ns)}}
	if err := k8s.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	waiting := func(name, queue string) *kueue.Workload {
		gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: other},
			Spec: kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(queue), Priority: ptr.To[int32](1000),
				PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}},
				}}}}}}
	}
	// Older than the run below and of its priority: ahead of it, in the
	// run's ClusterQueue through the other namespace's LocalQueue.
	if err := k8s.Create(ctx, waiting("ahead-from-b", "shared")); err != nil {
		t.Fatal(err)
	}
	// Waiting too, but on the other namespace's own ClusterQueue.
	if err := k8s.Create(ctx, waiting("elsewhere", "runs")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // creation times are in seconds
	f.research.runRef("sooner", "target: default\n")
	f.poll(t)
	sooner := f.runOf(t, "refs/tau/runs/sooner")
	queued := f.reconcileUntil(t, sooner.Name, taugridv1.PhaseQueued, func(r *taugridv1.TauRun) bool {
		return strings.HasPrefix(r.Status.Message, "queued #2 of 2 in rq9-a")
	})
	// Tenants are strangers: the workload ahead is counted and its
	// priority given, but neither it nor its namespace is named.
	if long := queued.Status.Workload.Reason; !strings.Contains(long, "Ahead: a workload of another team (priority 1000)") ||
		strings.Contains(long, "elsewhere") || strings.Contains(long, "ahead-from-b") || strings.Contains(long, "rq9-b") {
		t.Errorf("the explanation should count the workload ahead through the other namespace, and only it, naming neither:\n%s", long)
	}
	if p := queued.Status.Workload.Position; p == nil || *p != 2 {
		t.Errorf("position = %v, want 2", p)
	}
}
