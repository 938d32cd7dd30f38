package run

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A cancelled run's workload and its Kueue Workload are deleted at once;
// the run is Cancelled once no pod of it is left, so a cancelled run never
// says it is over while its pods still hold GPUs.
func TestACancelledRunWaitsForItsPodsToStop(t *testing.T) {
	cancelled := func() *taugridv1.TauRun {
		r := submitted(taugridv1.PhaseRunning)
		r.Spec.Cancel = true
		return r
	}
	running := builders.MakeJob("r1-1", ns).Unsuspended().Running()
	// A pod in its termination grace: deleted, still there.
	stopping := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Running().Finalizer("example.com/grace").Obj()
	cases := map[string]struct {
		objs    []client.Object
		phase   taugridv1.RunPhase
		message string
		ready   string
		requeue time.Duration
		events  []string
		kept    int // earlier attempts' Jobs, left to their TTL
	}{
		"a running attempt with a pod still stopping: its Job is deleted, the run waits": {
			objs:  []client.Object{cancelled(), job(running), workloadOf(true), stopping},
			phase: taugridv1.PhaseRunning, message: "cancelling: waiting for 1 pods to stop", requeue: time.Second},
		"a retried run: the stopped pod its first attempt's Job keeps holds nothing to wait for": {
			objs: []client.Object{
				builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "").Workload("Job", "r1-2", "team-a-runs").
					Attempt("r1-1", time.Time{}, time.Now(), taugridv1.FailureNodeLost).Attempt("r1-2", time.Time{}, time.Time{}, "").Cancel().Obj(),
				job(builders.MakeJob("r1-1", ns).Unsuspended()), builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Exited(1).Obj()},
			phase: taugridv1.PhaseCancelled, message: "cancelled: its run ref or tag was deleted", ready: "False/Cancelled",
			events: []string{"Normal Cancelled"}, kept: 1},
		"a running attempt whose pods are gone: cancelled": {
			objs:  []client.Object{cancelled(), job(running), workloadOf(true)},
			phase: taugridv1.PhaseCancelled, message: "cancelled: its run ref or tag was deleted", ready: "False/Cancelled",
			events: []string{"Normal Cancelled"}},
		"a running pod is deleted by the cancellation, and the run cancelled": {
			objs:  []client.Object{cancelled(), job(running), workloadOf(true), builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Running().Obj()},
			phase: taugridv1.PhaseCancelled, message: "cancelled: its run ref or tag was deleted", ready: "False/Cancelled",
			events: []string{"Normal Cancelled"}},
		"a Job gone already: its Workload, left pending, is deleted too": {
			objs:  []client.Object{cancelled(), workloadOf(false)},
			phase: taugridv1.PhaseCancelled, message: "cancelled: its run ref or tag was deleted", ready: "False/Cancelled",
			events: []string{"Normal Cancelled"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, nil, tc.objs...)
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if got.Status.Phase != tc.phase || got.Status.Message != tc.message {
				t.Errorf("phase %q %q, want %q %q", got.Status.Phase, got.Status.Message, tc.phase, tc.message)
			}
			if c := condition(got, taugridv1.ConditionReady); c != tc.ready {
				t.Errorf("Ready %q, want %q", c, tc.ready)
			}
			if n := len(w.jobs(t)); n != tc.kept {
				t.Errorf("%d Jobs left, want %d: the attempt's deleted", n, tc.kept)
			}
			if w.holds(t, workloadOf(true)) {
				t.Error("the Kueue Workload is left: it may hold quota until the garbage collector gets to it")
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

// TestACancelledRunIsCancelledOnceItsLastPodStops: the look after the pod
// went ends the wait.
func TestACancelledRunIsCancelledOnceItsLastPodStops(t *testing.T) {
	run := submitted(taugridv1.PhaseRunning)
	run.Spec.Cancel = true
	pod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Running().Finalizer("example.com/grace").Obj()
	w := newRunWorld(t, nil, run, job(builders.MakeJob("r1-1", ns).Unsuspended().Running()), pod)
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, "r1"); got.Status.Phase != taugridv1.PhaseRunning {
		t.Fatalf("phase %s, want the run still Running while its pod stops", got.Status.Phase)
	}
	stopped := &corev1.Pod{}
	if err := w.c.Get(t.Context(), client.ObjectKeyFromObject(pod), stopped); err != nil {
		t.Fatal(err)
	}
	if stopped.DeletionTimestamp.IsZero() {
		t.Fatal("the cancellation did not delete the running pod")
	}
	stopped.Finalizers = nil // its grace is over
	if err := w.c.Update(t.Context(), stopped); err != nil {
		t.Fatal(err)
	}
	res, err := w.reconcile(t, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, "r1"); got.Status.Phase != taugridv1.PhaseCancelled || res.RequeueAfter != 0 {
		t.Errorf("phase %s, requeue after %s; want Cancelled, done", got.Status.Phase, res.RequeueAfter)
	}
}
