package reconciler

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
		f.runRec = &RunReconciler{Client: k8s, Scheme: scheme, Files: f.runRec.Files, Policies: f.runRec.Policies,
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
	data, err := os.ReadFile("../examples/research/" + name)
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
		failed.Annotations = map[string]string{AnnotationResume: v}
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
