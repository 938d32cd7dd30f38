package integration

import (
	"context"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/policy"
)

// runFixture is a platform and a research repository registered in a
// tenant namespace, with the three reconcilers wired as the manager wires
// them, driven step by step by the test.
type runFixture struct {
	ns       string
	research *gitRepo
	repo     *taugridv1.TauRepository
	repos    *repoctrl.RepositoryReconciler
	runRec   *runctrl.RunReconciler
	// sealer seals the evidence of the attempts runRec ends; nil: none.
	sealer *sealing.EvidenceRecorder
	// plat is the platform the fixture's tenant belongs to.
	plat *platformFixture
}

// newRunFixture pushes a variant of the example platform whose tenant,
// queues, flavor and priorities carry the prefix, so fixtures never share a
// cluster-scoped object.
func newRunFixture(t testing.TB, prefix string, setup ...func(*gitRepo)) *runFixture {
	t.Helper()
	integration(t)
	f, _ := newRunFixtureOn(t, prefix, examplePlatformCopy(t, prefix), setup...)
	return f
}

// examplePlatformCopy is a copy of the example platform whose tenants,
// queues, flavor, priorities and cohort carry the prefix.
func examplePlatformCopy(t testing.TB, prefix string) string {
	t.Helper()
	return renamedCopy(t, "../../examples/platform", map[string]string{
		"team-a": prefix + "-a", "team-b": prefix + "-b", "tau-low": prefix + "-low", "tau-normal": prefix + "-normal",
		"tau-high": prefix + "-high", "name: h200\n": "name: " + prefix + "-h200\n", "cohortName: research": "cohortName: " + prefix,
	})
}

// newRunFixtureOn registers the platform in platformDir, which must be
// ready, and the example research repo in tenant prefix-a; setup changes
// that repo before the first poll.
func newRunFixtureOn(t testing.TB, prefix, platformDir string, setup ...func(*gitRepo)) (*runFixture, *platformFixture) {
	t.Helper()
	plat := newPlatformFrom(t, platformDir)
	return newRunFixtureWith(t, prefix, plat, setup...), plat
}

// newRunFixtureWith is newRunFixtureOn for a platform the test set up.
func newRunFixtureWith(t testing.TB, prefix string, plat *platformFixture, setup ...func(*gitRepo)) *runFixture {
	t.Helper()
	if p := plat.reconcile(t); !apimeta.IsStatusConditionTrue(p.Status.Conditions, taugridv1.ConditionReady) {
		t.Fatalf("platform not ready: %+v", p.Status.Conditions)
	}
	ns := prefix + "-a"
	research := newGitRepo(t, ns+"/research", "../../examples/research")
	repo := &taugridv1.TauRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "research", Namespace: ns},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: research.URL}, Platform: plat.name,
			Interval: metav1.Duration{Duration: time.Minute}},
	}
	if err := k8s.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	// Suspended once the test ends: every manager a later test starts
	// would poll it otherwise, and under make test's load that first
	// round of polls of every earlier test's repository has held a test's
	// own past its waits. Suspended, not deleted: the test's runs still
	// name it.
	t.Cleanup(func() {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))
		if err := k8s.Patch(context.Background(), &taugridv1.TauRepository{ObjectMeta: repo.ObjectMeta}, patch); client.IgnoreNotFound(err) != nil {
			t.Errorf("suspending the fixture's repository: %v", err)
		}
	})
	clock := clocktesting.NewFakePassiveClock(time.Now())
	f := &runFixture{ns: ns, research: research, repo: repo, plat: plat,
		repos: &repoctrl.RepositoryReconciler{Client: k8s, Git: gitClient, Policies: plat.r.Policies, Clock: clock, Recorder: events.NewFakeRecorder(100)},
		runRec: &runctrl.RunReconciler{Client: cacheLike{k8s}, APIReader: k8s, Scheme: scheme, Files: &policy.GitFiles{Client: k8s, Git: gitClient},
			Policies: plat.r.Policies, Clock: clock, Recorder: events.NewFakeRecorder(100)},
	}
	for _, set := range setup {
		set(research)
	}
	f.poll(t) // the first poll records what is already there
	return f
}

func (f *runFixture) poll(t testing.TB) {
	t.Helper()
	if _, err := f.repos.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(f.repo)}); err != nil {
		t.Fatalf("polling the repository: %v", err)
	}
}

func (f *runFixture) listRuns(t testing.TB) []taugridv1.TauRun {
	t.Helper()
	var list taugridv1.TauRunList
	if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func (f *runFixture) jobs(t testing.TB) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// runOf returns the one run a ref requested.
func (f *runFixture) runOf(t testing.TB, ref string) *taugridv1.TauRun {
	t.Helper()
	for _, r := range f.listRuns(t) {
		if r.Spec.Trigger.Ref == ref {
			return &r
		}
	}
	t.Fatalf("no TauRun for %s", ref)
	return nil
}

// reconcileRun drives the run reconciler until the run reaches phase.
func (f *runFixture) reconcileRun(t testing.TB, name string, phase taugridv1.RunPhase) *taugridv1.TauRun {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: name}}
		if _, err := f.runRec.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("reconciling run %s: %v", name, err)
		}
		if f.sealer != nil {
			// The evidence controller seals what the run reconciler ended;
			// its error is a retry, which the tests that care look at.
			_, _ = f.sealer.Reconcile(context.Background(), req)
		}
		run := &taugridv1.TauRun{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, run); err != nil {
			t.Fatal(err)
		}
		if run.Status.Phase == phase {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s (%s), want %s", name, run.Status.Phase, run.Status.Message, phase)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setJobStatus changes a Job's status as the Job controller would, which
// the test control plane does not run.
func setJobStatus(t testing.TB, ns, name, what string, set func(*batchv1.JobStatus)) {
	t.Helper()
	if err := updateJobStatus(ns, name, set); err != nil {
		t.Fatalf("%s Job %s: %v", what, name, err)
	}
}

// updateJobStatus sets the status of Job name as set changes it,
// retried on conflict.
func updateJobStatus(ns, name string, set func(*batchv1.JobStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		set(&j.Status)
		return k8s.Status().Update(context.Background(), j)
	})
}

// completeJob does what the Job controller would when the pod exits 0.
func completeJob(t testing.TB, ns, name string) {
	t.Helper()
	setJobStatus(t, ns, name, "completing", completed)
}

// completed is a Job's status once its pod exited 0.
func completed(st *batchv1.JobStatus) {
	now := metav1.Now()
	st.StartTime, st.CompletionTime, st.Succeeded = &now, &now, 1
	st.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
	}
}

func TestPushedRunTagBecomesOneAdmittedJobThatSucceeds(t *testing.T) {
	f := newRunFixture(t, "rt1")
	f.research.tag("run/first")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/first")
	head := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	if run.Spec.Commit != head || run.Spec.Target != "default" || run.Spec.Trigger.Kind != taugridv1.TriggerRunTag {
		t.Errorf("TauRun spec = %+v, want tag run/first at %s, target default", run.Spec, head)
	}

	admitted := f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	if w := admitted.Status.Workload; w == nil || !w.Admitted || w.Queue != "runs" {
		t.Errorf("workload status = %+v, want admitted in queue runs", w)
	}
	if admitted.Status.ConfigDigest == "" || admitted.Status.PolicyCommit == "" {
		t.Errorf("run does not record its config digest and policy commit: %+v", admitted.Status)
	}

	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))
	done := f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)
	if !apimeta.IsStatusConditionTrue(done.Status.Conditions, taugridv1.ConditionReady) {
		t.Errorf("a succeeded run is not Ready: %+v", done.Status.Conditions)
	}
	var phases []string
	for _, p := range done.Status.Phases {
		phases = append(phases, string(p.Phase))
	}
	if got := strings.Join(phases, ","); got != "Pending,Queued,Admitted,Succeeded" {
		t.Errorf("phases = %s, want Pending,Queued,Admitted,Succeeded", got)
	}

	t.Run("pushing the same tag again to the same commit starts nothing new", func(t *testing.T) {
		f.research.deleteRemoteTag("run/first")
		f.poll(t)
		f.research.tag("run/first")
		f.poll(t)
		f.poll(t)
		if n := len(f.listRuns(t)); n != 1 {
			t.Errorf("%d TauRuns, want 1", n)
		}
		if n := len(f.jobs(t)); n != 1 {
			t.Errorf("%d Jobs, want 1", n)
		}
	})
}

func TestInvalidTauFileFailsWithItsPositionAndSubmitsNothing(t *testing.T) {
	f := newRunFixture(t, "rt2")
	f.research.edit("tau.yaml", "  gpus: 1\n", "  gpus: -1\n")
	f.research.commit("break tau.yaml")
	f.research.tag("run/broken")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/broken")
	failed := f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	stalled := apimeta.FindStatusCondition(failed.Status.Conditions, taugridv1.ConditionStalled)
	if want := "tau.yaml:11:9: compute.gpus: must be between 0 and 64, got -1"; stalled == nil || stalled.Message != want {
		t.Errorf("Stalled condition = %+v, want message %q", stalled, want)
	}
	if n := len(f.jobs(t)); n != 0 {
		t.Errorf("%d Jobs were created for an invalid tau.yaml", n)
	}
}

func TestDeletingTheRunTagCancelsTheRun(t *testing.T) {
	f := newRunFixture(t, "rt3")
	f.research.tag("run/doomed")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/doomed")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)

	f.research.deleteRemoteTag("run/doomed")
	f.poll(t)
	if got := f.runOf(t, "refs/tags/run/doomed"); !got.Spec.Cancel {
		t.Fatal("the run was not marked for cancellation")
	}
	f.reconcileRun(t, run.Name, taugridv1.PhaseCancelled)
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: render.WorkloadName(run.Name, 1)}, &batchv1.Job{})
	if !apierrors.IsNotFound(err) {
		// Background deletion: the Job may linger with a deletion timestamp.
		j := &batchv1.Job{}
		if k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: render.WorkloadName(run.Name, 1)}, j) == nil && j.DeletionTimestamp.IsZero() {
			t.Errorf("the cancelled run's Job still exists")
		}
	}
}

func TestARunRefForTheRayTargetBecomesAnAdmittedRayJobThatSucceeds(t *testing.T) {
	f := newRunFixture(t, "rt7")
	ref := f.research.runRef("r-7f3a", "target: ray\noverrides: {limits.timeout: 1h}\nrequester: alice@example.com\n")
	f.poll(t)
	run := f.runOf(t, ref)
	if run.Spec.Target != "ray" || run.Spec.Trigger.Kind != taugridv1.TriggerRunRef || run.Spec.Trigger.Requester != "alice@example.com" {
		t.Errorf("run spec = %+v, want a RunRef for target ray requested by alice", run.Spec)
	}
	admitted := f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	if admitted.Status.Workload.Kind != "RayJob" {
		t.Fatalf("workload = %+v, want a RayJob", admitted.Status.Workload)
	}
	rj := &rayv1.RayJob{}
	key := types.NamespacedName{Namespace: f.ns, Name: admitted.Status.Workload.Name}
	if err := k8s.Get(context.Background(), key, rj); err != nil {
		t.Fatal(err)
	}
	if d := rj.Spec.ActiveDeadlineSeconds; d == nil || *d != 3600 {
		t.Errorf("RayJob activeDeadlineSeconds = %v, want the run ref's override limits.timeout=1h", d)
	}
	// No Ray dashboard answers in the test cluster: report the job's end as
	// KubeRay would, on the latest copy (KubeRay itself writes the status
	// too).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), key, rj); err != nil {
			return err
		}
		rj.Status.JobDeploymentStatus, rj.Status.JobStatus = rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded
		return k8s.Status().Update(context.Background(), rj)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)
}

func TestAFailedAttemptIsClassified(t *testing.T) {
	f := newRunFixture(t, "rt10")
	f.research.tag("run/exits-3")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/exits-3")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	ctx := context.Background()
	nodeObj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rt10-gpu-1"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: run.Name + "-1-abcde", Namespace: f.ns, Labels: map[string]string{render.LabelRun: run.Name}},
		Spec:       corev1.PodSpec{NodeName: nodeObj.Name, Containers: []corev1.Container{{Name: "main", Image: "python:3.12"}}},
	}
	for _, o := range []client.Object{nodeObj, pod} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	failJob(t, f.ns, render.WorkloadName(run.Name, 1))
	failed := f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	if want := "failed (UserError): container main exited with code 3"; failed.Status.Message != want {
		t.Errorf("message = %q, want %q", failed.Status.Message, want)
	}
	if a := failed.Status.Attempts[0]; a.FailureClass != "UserError" || a.EndTime == nil {
		t.Errorf("attempt = %+v, want class UserError and an end time", a)
	}
}

// failJob does what the Job controller would when the pod fails.
func failJob(t testing.TB, ns, name string) {
	t.Helper()
	setJobStatus(t, ns, name, "failing", func(st *batchv1.JobStatus) {
		now := metav1.Now()
		st.StartTime, st.Failed = &now, 1
		st.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
		}
	})
}

func TestAGPUFaultIsRetriedOffTheFaultyNodeAndAUserErrorIsNot(t *testing.T) {
	f := newRunFixture(t, "rt11")
	clk := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	f.research.tag("run/flaky-gpu")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/flaky-gpu")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	ctx := context.Background()

	// Attempt 1 dies on a node whose GPU the node agent marked unhealthy.
	bad := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rt11-gpu-bad"}}
	if err := k8s.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	bad.Status.Conditions = []corev1.NodeCondition{{Type: taugridv1.ConditionGPUHealthy, Status: corev1.ConditionFalse, Reason: "XID", Message: "GPU 2: XID 79"}}
	if err := k8s.Status().Update(ctx, bad); err != nil {
		t.Fatal(err)
	}
	exitedPod(t, f.ns, run.Name, 1, bad.Name, 1)
	failJob(t, f.ns, render.WorkloadName(run.Name, 1))
	waiting := f.reconcileRun(t, run.Name, taugridv1.PhasePending)
	if !strings.Contains(waiting.Status.Message, "retrying in 30s (attempt 2 of 3) after failed (GPUFault): node rt11-gpu-bad: GPU 2: XID 79") {
		t.Fatalf("message = %q, want a scheduled retry after the GPU fault", waiting.Status.Message)
	}
	if _, err := f.runRec.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: run.Name}}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.jobs(t)); n != 1 {
		t.Fatalf("%d Jobs before the backoff passed, want 1", n)
	}

	clk.SetTime(clk.Now().Add(31 * time.Second))
	f.reconcileRun(t, run.Name, taugridv1.PhaseQueued)
	second := &batchv1.Job{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: render.WorkloadName(run.Name, 2)}, second); err != nil {
		t.Fatalf("attempt 2's Job: %v", err)
	}
	terms := second.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if got := terms[0].MatchExpressions[len(terms[0].MatchExpressions)-1]; got.Operator != corev1.NodeSelectorOpNotIn || got.Values[0] != bad.Name {
		t.Errorf("attempt 2 does not avoid the faulty node: %+v", terms)
	}

	env := map[string]string{}
	for _, e := range second.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["TAU_ATTEMPT"] != "2" || env["TAU_RETRY_REASON"] != "GPUFault" {
		t.Errorf("attempt 2 environment: TAU_ATTEMPT=%q TAU_RETRY_REASON=%q, want 2 and GPUFault", env["TAU_ATTEMPT"], env["TAU_RETRY_REASON"])
	}

	// Attempt 2 exits non-zero on a healthy node: the researcher's bug, not retried.
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	good := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rt11-gpu-good"}}
	if err := k8s.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	exitedPod(t, f.ns, run.Name, 2, good.Name, 2)
	failJob(t, f.ns, render.WorkloadName(run.Name, 2))
	failed := f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	if want := "failed (UserError): container main exited with code 2"; failed.Status.Message != want {
		t.Errorf("message = %q, want %q", failed.Status.Message, want)
	}
	if got := []string{failed.Status.Attempts[0].FailureClass, failed.Status.Attempts[1].FailureClass}; got[0] != "GPUFault" || got[1] != "UserError" {
		t.Errorf("attempt classes = %v, want [GPUFault UserError]", got)
	}
}

// exitedPod records a pod of an attempt whose main container exited.
func exitedPod(t testing.TB, ns, run string, attempt int, node string, code int32) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-abcde", run, attempt), Namespace: ns,
			Labels: map[string]string{render.LabelRun: run, render.LabelAttempt: fmt.Sprint(attempt)}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "python:3.12"}}},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}}}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}
