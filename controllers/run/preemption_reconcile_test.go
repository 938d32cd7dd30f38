package run

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// runningAnHour is run r1 whose attempt r1-1 has been running for an hour.
func runningAnHour() *taugridv1.TauRun {
	return builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").Workload("Job", "r1-1", "team-a-runs").
		Attempt("r1-1", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
}

// preemptedWorkloadOf is the Workload of Job r1-1 just after Kueue
// preempted it (preemptedMsg names the preemptor's job UID, j1).
func preemptedWorkloadOf() *kueue.Workload {
	wl := workloadOf(true)
	wl.Status = *evictedWorkload().Status.DeepCopy()
	return wl
}

// preemptor is the Workload of the job whose UID is j1, controlled by a
// Job named owner in namespace team-b.
func preemptor(owner string) *kueue.Workload {
	wl := builders.MakeWorkload("job-"+owner, "team-b").Obj()
	wl.Labels = map[string]string{shared.KueueJobUID: "j1"}
	wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner, UID: "j1", Controller: ptr.To(true)}}
	return wl
}

// A preemption is recorded on the attempt first, and acted on at the next
// look: the attempt ends Preempted, its Job and Workload are deleted so
// Kueue cannot start it again from scratch, and the retry policy decides.
func TestAPreemptedAttemptIsRecordedThenEndedAndRetried(t *testing.T) {
	lost := ", after 1h0m0s of running (work since its last checkpoint is lost)"
	cases := map[string]struct {
		objs    []client.Object
		tau     []byte // nil: the example's
		phase   taugridv1.RunPhase
		message string // its start
		reason  string // the attempt's
		requeue time.Duration
		events  []string
	}{
		"preempted by another tenant's run: retried after 30s": {
			objs:  []client.Object{preemptor("r2-1")},
			phase: taugridv1.PhasePending, message: "retrying in 30s (attempt 2 of 3) after failed (Preempted): preempted by a run of another team",
			reason: "preempted by a run of another team (prioritization in the ClusterQueue)" + lost, requeue: 30 * time.Second,
			events: []string{"Warning Retrying"}},
		"preempted by a workload that is no run's: named by its Workload": {
			objs:  []client.Object{preemptor("nightly")},
			phase: taugridv1.PhasePending, message: "retrying in 30s",
			reason: "preempted by a workload of another team (prioritization in the ClusterQueue)" + lost, requeue: 30 * time.Second,
			events: []string{"Warning Retrying"}},
		"preempted by a workload gone since": {
			phase: taugridv1.PhasePending, message: "retrying in 30s",
			reason: "preempted by another workload (prioritization in the ClusterQueue)" + lost, requeue: 30 * time.Second,
			events: []string{"Warning Retrying"}},
		"preempted once more than limits.max_preemptions allows: the run fails": {
			objs: []client.Object{preemptor("r2-1")}, tau: tauWithLimits(t, "max_preemptions: 0"),
			phase: taugridv1.PhaseFailed, message: "failed (Preempted): preempted by a run of another team",
			reason: "preempted by a run of another team (prioritization in the ClusterQueue)" + lost,
			events: []string{"Warning Failed"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Running().Obj()
			objs := append([]client.Object{runningAnHour(), job(builders.MakeJob("r1-1", ns)), preemptedWorkloadOf(), pod,
				builders.MakeGPUNode("n1").Obj()}, tc.objs...)
			w := newRunWorld(t, nil, objs...)
			if tc.tau != nil {
				w.files.files["tau.yaml"] = tc.tau
			}

			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if rec := lastAttempt(t, got).Preemption; rec == nil || rec.Message != preemptedMsg || !rec.Time.Time.Equal(sharedtest.Now) {
				t.Fatalf("preemption recorded %+v, want Kueue's message at now", rec)
			}
			if got.Status.Phase != taugridv1.PhaseRunning || lastAttempt(t, got).EndTime != nil {
				t.Errorf("the first look ended the attempt (%s, %s): it only records", got.Status.Phase, got.Status.Message)
			}
			if !w.holds(t, job(builders.MakeJob("r1-1", ns))) || !w.holds(t, preemptedWorkloadOf()) {
				t.Error("the first look deleted the Job or its Workload before the record was stored")
			}
			if res.RequeueAfter != recordSettle {
				t.Errorf("requeue after %s, want recordSettle", res.RequeueAfter)
			}

			res, err = w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got = w.run(t, "r1")
			if got.Status.Phase != tc.phase || !strings.HasPrefix(got.Status.Message, tc.message) {
				t.Errorf("phase %q %q, want %q %q...", got.Status.Phase, got.Status.Message, tc.phase, tc.message)
			}
			a := lastAttempt(t, got)
			if diff := cmp.Diff([]string{"Preempted", tc.reason}, []string{a.FailureClass, a.Reason}); diff != "" {
				t.Errorf("the attempt's class and reason (-want +got):\n%s", diff)
			}
			if a.EndTime == nil {
				t.Error("the attempt has no end time")
			}
			retrying := tc.phase == taugridv1.PhasePending
			if (got.Status.Workload == nil) != retrying {
				t.Errorf("status.workload %+v; retrying: %v", got.Status.Workload, retrying)
			}
			for _, o := range []client.Object{job(builders.MakeJob("r1-1", ns)), preemptedWorkloadOf(), pod} {
				if w.holds(t, o) {
					t.Errorf("%T %s still there: a preempted attempt holds nothing", o, o.GetName())
				}
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			if diff := cmp.Diff(tc.events, w.reasons()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d, want %d", got.Status.ObservedGeneration, got.Generation)
			}
		})
	}
}

// TestAPreemptedAttemptWhoseJobWentFirstIsNoDeletion: the Job may be gone
// (deleted with its Workload still evicted) before the run is looked at;
// the Workload, found by its owner's name, still says preempted: the
// attempt ends Preempted and is retried, not failed as deleted.
func TestAPreemptedAttemptWhoseJobWentFirstIsNoDeletion(t *testing.T) {
	w := newRunWorld(t, nil, runningAnHour(), preemptedWorkloadOf())
	for range 2 {
		if _, err := w.reconcile(t, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	got := w.run(t, "r1")
	if got.Status.Phase != taugridv1.PhasePending || lastAttempt(t, got).FailureClass != string(taugridv1.FailurePreempted) {
		t.Errorf("phase %s (%s), class %q; want Pending for a retry of a Preempted attempt",
			got.Status.Phase, got.Status.Message, lastAttempt(t, got).FailureClass)
	}
	if w.holds(t, preemptedWorkloadOf()) {
		t.Error("the evicted Workload of a Job gone is left: Kueue could admit it again")
	}
}
