package run

import (
	"fmt"
	"slices"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// submitted is run r1 with attempt 1's Job r1-1 submitted, at phase.
func submitted(phase taugridv1.RunPhase) *taugridv1.TauRun {
	return builders.MakeTauRun("r1", ns).UID("u1").Phase(phase, "").Workload("Job", "r1-1", "team-a-runs").
		Attempt("r1-1", time.Time{}, time.Time{}, "").Obj()
}

// job is the attempt's Job, owned by the run, as the reconciler made it.
func job(b *builders.JobBuilder) *batchv1.Job {
	j := b.Obj()
	j.UID = "job-uid"
	j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "taugrid.dev/v1alpha1", Kind: "TauRun", Name: "r1", UID: "u1",
		Controller: ptr.To(true)}}
	return j
}

// workloadOf is Kueue's Workload of the Job, admitted or only pending.
func workloadOf(admitted bool) *kueue.Workload {
	wl := builders.MakeWorkload("job-r1-1", ns).Obj()
	wl.Labels = map[string]string{shared.KueueJobUID: "job-uid"}
	wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "r1-1", UID: "job-uid", Controller: ptr.To(true)}}
	now := metav1.NewTime(sharedtest.Now)
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: now}}
	if admitted {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: now})
	}
	return wl
}

func TestProgressBranches(t *testing.T) {
	cases := map[string]struct {
		objs  []client.Object
		phase taugridv1.RunPhase
		ready string // the Ready condition, status/reason; "" when unset
		event bool   // a phase change is announced
	}{
		"a suspended Job Kueue has not admitted is queued": {
			objs:  []client.Object{submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns))},
			phase: taugridv1.PhaseQueued},
		"an admitted Job whose pods do not run yet is admitted": {
			objs:  []client.Object{submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns).Unsuspended()), workloadOf(true)},
			phase: taugridv1.PhaseAdmitted}, // the status says so; no Event
		"a Job complete is a run succeeded, Ready": {
			objs: []client.Object{submitted(taugridv1.PhaseRunning),
				job(builders.MakeJob("r1-1", ns).Unsuspended().Condition(batchv1.JobComplete, "", "")), workloadOf(true)},
			phase: taugridv1.PhaseSucceeded, ready: "True/Succeeded", event: true},
		"a Job deleted under the run fails it": {
			objs:  []client.Object{submitted(taugridv1.PhaseQueued)},
			phase: taugridv1.PhaseFailed, ready: "False/" + ReasonFailed, event: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, nil, tc.objs...)
			if _, err := w.reconcile(t, "r1"); err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if got.Status.Phase != tc.phase {
				t.Errorf("phase %q (%s), want %q", got.Status.Phase, got.Status.Message, tc.phase)
			}
			if got.Status.Message == "" {
				t.Error("the run says nothing of its phase")
			}
			if c := condition(got, taugridv1.ConditionReady); c != tc.ready {
				t.Errorf("Ready %q, want %q", c, tc.ready)
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d, want %d", got.Status.ObservedGeneration, got.Generation)
			}
			if event := len(w.events.Events) > 0; event != tc.event {
				t.Errorf("events announced: %v, want %v", event, tc.event)
			}
		})
	}
}

// TestTheLimitsAreResolvedOncePerPolicyCommit: a queued run's deadlines
// are read from its plan; the plan is resolved from git once per policy
// commit, not at every look.
func TestTheLimitsAreResolvedOncePerPolicyCommit(t *testing.T) {
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns)))
	for range 3 {
		if _, err := w.reconcile(t, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	if w.files.reads != 1 {
		t.Errorf("tau.yaml read %d times in three looks at a queued run, want once", w.files.reads)
	}
	w.policies.commit = "c0ffee0000000000000000000000000000000000"
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if w.files.reads != 2 {
		t.Errorf("tau.yaml read %d times, want twice once the policy moved", w.files.reads)
	}
	got := w.run(t, "r1")
	if got.Status.PolicyCommit != "" {
		t.Errorf("a deadline check recorded policy %q on the run: the run records the policy it was submitted under", got.Status.PolicyCommit)
	}
	if _, ok := shared.MemoOf(&w.r.planned).Get(types.UID("u1")); !ok {
		t.Fatal("no limits kept for the queued run")
	}
	ended := got.DeepCopy()
	ended.Status.Phase = taugridv1.PhaseCancelled
	if err := w.c.Status().Update(t.Context(), ended); err != nil {
		t.Fatal(err)
	}
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := shared.MemoOf(&w.r.planned).Get(types.UID("u1")); ok {
		t.Error("an ended run's limits are still kept")
	}
}

// TestALimitCheckThatCannotReadGitIsRetried: the deadlines of a queued run
// whose plan cannot be read now (git unavailable) are not silently
// skipped: the reconcile is retried, and the generation not taken for
// handled.
func TestALimitCheckThatCannotReadGitIsRetried(t *testing.T) {
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns)))
	w.files.err = errTestGit
	if _, err := w.reconcile(t, "r1"); err == nil {
		t.Fatal("no error: a plan that could not be read was taken for one with no limits")
	}
	got := w.run(t, "r1")
	if got.Status.ObservedGeneration == got.Generation {
		t.Error("observedGeneration moved on a transient error")
	}
	if got.Status.Message == "" || got.Status.Workload.Reason == "" {
		t.Errorf("status %q (workload: %q): what the cluster shows is not recorded while the deadlines cannot be read", got.Status.Message, got.Status.Workload.Reason)
	}
	w.files.err = nil
	delete(w.files.files, "tau.yaml") // the run's file cannot be planned at all: no limit applies
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatalf("a run that cannot be planned: %v, want no deadline and no error", err)
	}
}

// TestASucceededAttemptRecordsTheNodesItsPodsRanOn: every attempt, not only
// a failed one, says where its pods ran, for its evidence.
func TestASucceededAttemptRecordsTheNodesItsPodsRanOn(t *testing.T) {
	var pods []client.Object
	for i, node := range []string{"gpu-b", "gpu-a", ""} { // the last never bound
		p := runningPod(fmt.Sprintf("r1-1-%d", i), "")
		p.Namespace, p.Spec.NodeName = ns, node
		p.Labels = map[string]string{render.LabelRun: "r1", render.LabelAttempt: "1"}
		p.Status.Phase = corev1.PodSucceeded
		pods = append(pods, &p)
	}
	objs := append([]client.Object{submitted(taugridv1.PhaseRunning),
		job(builders.MakeJob("r1-1", ns).Unsuspended().Condition(batchv1.JobComplete, "", "")), workloadOf(true)}, pods...)
	w := newRunWorld(t, nil, objs...)
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	got := w.run(t, "r1")
	if got.Status.Phase != taugridv1.PhaseSucceeded {
		t.Fatalf("phase %q (%s), want Succeeded", got.Status.Phase, got.Status.Message)
	}
	if nodes := got.Status.Attempts[0].Nodes; !slices.Equal(nodes, []string{"gpu-a", "gpu-b"}) {
		t.Errorf("attempt 1 ran on %v, want [gpu-a gpu-b]", nodes)
	}
}
