package run

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// A run passing through its start writes its status at each phase, not at
// each sentence between: an admitted attempt starting with nothing holding
// it is a brief step, its detail held until the step has lasted briefHold
// (past DetailInterval); a new phase is written at once.
func TestAStartThatGoesWellIsWrittenAtItsPhasesAlone(t *testing.T) {
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns).Unsuspended()), workloadOf(true))
	w.r.DetailInterval = 2 * time.Second
	ctx := context.Background()
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	admitted := w.run(t, "r1")
	if admitted.Status.Phase != taugridv1.PhaseAdmitted {
		t.Fatalf("phase %s, want Admitted written at once", admitted.Status.Phase)
	}

	// Its pod appears, waiting for the scheduler: detail of a brief step,
	// held past the detail interval, to briefHold.
	pending := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).Obj()
	if err := w.c.Create(ctx, pending); err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{500 * time.Millisecond, 2500 * time.Millisecond} {
		w.after(step)
		res, err := w.reconcile(t, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if got := w.run(t, "r1"); got.Status.Message != admitted.Status.Message || got.ResourceVersion != admitted.ResourceVersion {
			t.Errorf("detail of a start going well written after %s: %q", step, got.Status.Message)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > briefHold {
			t.Errorf("requeued after %s, want the rest of briefHold", res.RequeueAfter)
		}
	}

	// The pod runs a moment later: a new phase, written at once.
	running := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("gpu-1").Running().Obj()
	if err := w.c.Delete(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(ctx, running); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	w.after(100 * time.Millisecond)
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, "r1"); got.Status.Phase != taugridv1.PhaseRunning {
		t.Errorf("phase %s (%q) 100ms after the last write, want Running at once", got.Status.Phase, got.Status.Message)
	}
}

// A start that lasts says so once it has lasted briefHold; one that
// something holds (here a pod no node fits) is no brief step: the hold
// turns a condition, written at once.
func TestAStartThatLastsOrIsHeldIsWrittenAsDetail(t *testing.T) {
	unschedulable := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).Obj()
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}
	for name, tc := range map[string]struct {
		pod     *corev1.Pod
		written time.Duration // after the Admitted write
		says    string
	}{
		"waiting for the scheduler for long": {pod: builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).Obj(), written: briefHold, says: "1 waiting for the scheduler"},
		"a pod no node fits":                 {pod: unschedulable, written: 100 * time.Millisecond, says: "admitted, not starting: no node fits"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns).Unsuspended()), workloadOf(true))
			w.r.DetailInterval = 2 * time.Second
			if _, err := w.reconcile(t, "r1"); err != nil {
				t.Fatal(err)
			}
			admitted := w.run(t, "r1")
			if err := w.c.Create(context.Background(), tc.pod); err != nil {
				t.Fatal(err)
			}
			if before := tc.written - 100*time.Millisecond; before > 0 {
				w.lookAfter(t, 0) // the pod's event brings the run a look at once
				if got := w.lookAfter(t, before); got.ResourceVersion != admitted.ResourceVersion {
					t.Errorf("written %s after the Admitted write: %q; want %s", before, got.Status.Message, tc.written)
				}
			}
			if got := w.lookAfter(t, 100*time.Millisecond); !strings.Contains(got.Status.Message, tc.says) {
				t.Errorf("%s after the Admitted write the run says %q, want %q", tc.written, got.Status.Message, tc.says)
			}
		})
	}
}

// lookAfter moves the world's clock on by d, has the reconciler look at
// run r1 then, and returns the run as stored after the look.
func (w *runWorld) lookAfter(t *testing.T, d time.Duration) *taugridv1.TauRun {
	t.Helper()
	w.after(d)
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	return w.run(t, "r1")
}

// Without an interval every change is written.
func TestWithoutADetailIntervalEveryChangeIsWritten(t *testing.T) {
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns).Unsuspended()), workloadOf(true))
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(context.Background(), builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).Obj()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, "r1"); !strings.Contains(got.Status.Message, "waiting for the scheduler") {
		t.Errorf("message %q, want the pod's wait at once", got.Status.Message)
	}
}

// What is detail, and what is not: an unchanged status has nothing to
// hold back, and blanking the detail of a copy leaves the run as it was.
func TestDetailIsWhatAPersonReadsOfAPhaseInProgress(t *testing.T) {
	base := submitted(taugridv1.PhaseQueued).Status
	base.Message = "queued #2 of 3 in runs"
	cases := map[string]struct {
		change func(*taugridv1.TauRunStatus)
		detail bool
	}{
		"nothing":               {change: func(*taugridv1.TauRunStatus) {}, detail: false},
		"the message":           {change: func(s *taugridv1.TauRunStatus) { s.Message = "queued #1 of 3 in runs" }, detail: true},
		"the queue position":    {change: func(s *taugridv1.TauRunStatus) { s.Workload.Position = ptr.To[int32](1) }, detail: true},
		"the nodes":             {change: func(s *taugridv1.TauRunStatus) { s.Attempts[0].Nodes = []string{"gpu-1"} }, detail: true},
		"the phase":             {change: func(s *taugridv1.TauRunStatus) { s.Phase = taugridv1.PhaseAdmitted }, detail: false},
		"the workload admitted": {change: func(s *taugridv1.TauRunStatus) { s.Workload.Admitted = true }, detail: false},
	}
	for name, tc := range cases {
		now := *base.DeepCopy()
		tc.change(&now)
		before := *now.DeepCopy()
		if got := detailOnly(&base, &now); got != tc.detail {
			t.Errorf("%s: detail %v, want %v", name, got, tc.detail)
		}
		if !equality.Semantic.DeepEqual(before, now) {
			t.Errorf("%s: judging the change changed the status", name)
		}
	}
}

// The longer a run has been in its phase, the longer its detail waits, up
// to maxDetailInterval: half its time in the phase once that is more than
// the interval. A run just queued shows each move; one queued for minutes
// shows its place as it was at most 30 s ago.
func TestDetailWaitsLongerTheLongerTheRunHasBeenInItsPhase(t *testing.T) {
	now := sharedtest.Now
	for _, tc := range []struct {
		in, interval time.Duration // in its phase; DetailInterval
		want         time.Duration
	}{
		{in: 0, interval: 2 * time.Second, want: 2 * time.Second},
		{in: 3 * time.Second, interval: 2 * time.Second, want: 2 * time.Second},
		{in: 40 * time.Second, interval: 2 * time.Second, want: 20 * time.Second},
		{in: 10 * time.Minute, interval: 2 * time.Second, want: maxDetailInterval},
		{in: 10 * time.Minute, interval: 2 * time.Minute, want: 2 * time.Minute}, // never shorter than the flag
	} {
		run := submitted(taugridv1.PhaseQueued)
		run.Status.Phases = []taugridv1.PhaseTransition{{Phase: taugridv1.PhaseQueued, Time: metav1.NewTime(now.Add(-tc.in))}}
		r := &RunReconciler{Clock: sharedtest.Clock(), DetailInterval: tc.interval}
		if got := r.detailInterval(run); got != tc.want {
			t.Errorf("%s in its phase, --status-detail-interval %s: %s, want %s", tc.in, tc.interval, got, tc.want)
		}
	}
	if got := (&RunReconciler{Clock: sharedtest.Clock(), DetailInterval: time.Second}).detailInterval(submitted(taugridv1.PhaseQueued)); got != time.Second {
		t.Errorf("a phase with no time recorded: %s, want the flag's 1s", got)
	}

	// In the reconciler: a queued run's new place, 10 s after its last
	// write and 40 s into its wait, is held for the 10 s left.
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns)))
	w.r.DetailInterval = 2 * time.Second
	run := w.run(t, "r1")
	run.Status.Phases = []taugridv1.PhaseTransition{{Phase: taugridv1.PhaseQueued, Time: metav1.NewTime(now.Add(-30 * time.Second))}}
	run.Status.Message = "queued #2 of 2 in team-a-runs"
	if err := w.c.Status().Update(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	w.r.noteWrite(run)
	w.after(10 * time.Second)
	base := w.run(t, "r1")
	moved := base.DeepCopy()
	moved.Status.Message = "queued #1 of 2 in team-a-runs"
	if got := w.r.detailWait(base, moved); got != 10*time.Second {
		t.Errorf("held %s, want the 10s left of 20s (half of 40s queued)", got)
	}
}

// A queued run whose workload holds its quota and waits on TauGrid's own
// admission check alone does not say so unless the wait lasts
// briefHold: the check decides, Kueue admits, and the next write is the
// Admitted phase. A check that takes longer is written then; a wait on
// another controller's check is written as any detail.
func TestAWaitOnTauGridsOwnCheckIsWrittenOnlyIfItLasts(t *testing.T) {
	ctx := context.Background()
	// reserve has Kueue reserve the workload's quota, checks pending.
	reserve := func(t *testing.T, w *runWorld, checks ...string) {
		t.Helper()
		wl := workloadOf(false)
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(wl), wl); err != nil {
			t.Fatal(err)
		}
		wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved",
			LastTransitionTime: metav1.NewTime(w.r.Clock.Now())}}
		for _, name := range checks {
			wl.Status.AdmissionChecks = append(wl.Status.AdmissionChecks, kueue.AdmissionCheckState{
				Name: kueue.AdmissionCheckReference(name), State: kueue.CheckStatePending, LastTransitionTime: metav1.NewTime(w.r.Clock.Now())})
		}
		if err := w.c.Status().Update(ctx, wl); err != nil {
			t.Fatal(err)
		}
	}
	type step struct {
		after  time.Duration
		admit  bool   // Kueue admits the workload before this look
		writes int    // status writes so far
		says   string // the run's message after this look
	}
	cases := map[string]struct {
		checks []string
		steps  []step
	}{
		"decided in a second": {checks: []string{"taugrid-policy-p"}, steps: []step{
			{writes: 0, says: "queued"},
			{after: time.Second, admit: true, writes: 1, says: "admitted"},
		}},
		"a check that lasts": {checks: []string{"taugrid-policy-p"}, steps: []step{
			{writes: 0, says: "queued"},
			{after: 3 * time.Second, writes: 0, says: "queued"},
			{after: 2 * time.Second, writes: 1, says: "waiting for admission checks: taugrid-policy-p"},
		}},
		"another controller's check": {checks: []string{"taugrid-policy-p", "provisioning"}, steps: []step{
			{writes: 1, says: "waiting for admission checks: taugrid-policy-p, provisioning"},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			waiting := workloadOf(false)
			waiting.Status.Conditions = nil // in the queue, no quota yet
			w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns)), waiting)
			w.r.DetailInterval = 2 * time.Second
			if _, err := w.reconcile(t, "r1"); err != nil {
				t.Fatal(err)
			}
			queued := w.run(t, "r1")
			if !strings.HasPrefix(queued.Status.Message, "queued") {
				t.Fatalf("the run in the queue says %q", queued.Status.Message)
			}
			w.after(time.Minute) // its last write long ago
			reserve(t, w, tc.checks...)
			writes, last := 0, queued.ResourceVersion
			for i, s := range tc.steps {
				w.after(s.after)
				if s.admit {
					wl := workloadOf(true)
					if err := w.c.Get(ctx, client.ObjectKeyFromObject(wl), wl); err != nil {
						t.Fatal(err)
					}
					wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue,
						Reason: "Admitted", LastTransitionTime: metav1.NewTime(w.r.Clock.Now())})
					wl.Status.AdmissionChecks[0].State = kueue.CheckStateReady
					if err := w.c.Status().Update(ctx, wl); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := w.reconcile(t, "r1"); err != nil {
					t.Fatal(err)
				}
				got := w.run(t, "r1")
				if got.ResourceVersion != last {
					writes++
					last = got.ResourceVersion
				}
				if writes != s.writes || !strings.Contains(got.Status.Message, s.says) {
					t.Errorf("look %d: %d writes, message %q; want %d saying %q", i, writes, got.Status.Message, s.writes, s.says)
				}
			}
		})
	}
}

// A Job just submitted whose Workload Kueue has not made yet is in a brief
// step: the run says "submitted" until that has lasted briefHold, then
// that Kueue has not seen it.
func TestAWorkloadKueueHasNotMadeYetIsWrittenOnlyIfItLasts(t *testing.T) {
	w := newRunWorld(t, nil, builders.MakeTauRun("r1", ns).UID("u1").Obj())
	w.r.DetailInterval = 2 * time.Second
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	before := w.run(t, "r1")
	if before.Status.Phase != taugridv1.PhaseQueued || !strings.HasPrefix(before.Status.Message, "submitted") {
		t.Fatalf("the run submitted is %s: %q", before.Status.Phase, before.Status.Message)
	}
	// The step is first seen at the first look, 100 ms after the write.
	for _, step := range []time.Duration{100 * time.Millisecond, 3 * time.Second, 1900 * time.Millisecond} {
		if got := w.lookAfter(t, step); got.ResourceVersion != before.ResourceVersion {
			t.Fatalf("written before briefHold: %q", got.Status.Message)
		}
	}
	if got := w.lookAfter(t, 100*time.Millisecond); got.Status.Message != "waiting for Kueue to see the workload" {
		t.Errorf("after briefHold the run says %q, want that Kueue has not seen the workload", got.Status.Message)
	}
}

// Each step of a start is brief on its own: a Job Kueue took 20 s to
// unsuspend (the run said so with its Admitted phase) starts a new step
// when it is unsuspended, held as any, so the run's next write is Running.
func TestEachStepOfAStartIsHeldOnItsOwn(t *testing.T) {
	ctx := context.Background()
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns)), workloadOf(true))
	w.r.DetailInterval = 2 * time.Second
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	admitted := w.run(t, "r1")
	if !strings.Contains(admitted.Status.Message, "still suspended") {
		t.Fatalf("the admitted run says %q, want the Job still suspended", admitted.Status.Message)
	}
	w.lookAfter(t, 20*time.Second)
	j := &batchv1.Job{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r1-1"}, j); err != nil {
		t.Fatal(err)
	}
	j.Spec.Suspend = ptr.To(false)
	if err := w.c.Update(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(ctx, builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).Obj()); err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{100 * time.Millisecond, 4800 * time.Millisecond} {
		if got := w.lookAfter(t, step); got.ResourceVersion != admitted.ResourceVersion {
			t.Fatalf("a step of the start written before it lasted briefHold: %q", got.Status.Message)
		}
	}
	if got := w.lookAfter(t, 200*time.Millisecond); !strings.Contains(got.Status.Message, "waiting for the scheduler") {
		t.Errorf("a step that lasted briefHold: the run says %q, want the pod's wait", got.Status.Message)
	}
}

// A controller that is behind (more runs ready in its work queue than it
// has workers) writes each phase at once and holds what only adds detail
// to maxDetailInterval after the run's last write; one that keeps up
// writes the same detail at the detail interval.
func TestABehindControllerWritesPhasesAtOnceAndDetailLater(t *testing.T) {
	ctx := context.Background()
	for _, behind := range []bool{false, true} {
		t.Run(fmt.Sprintf("behind=%t", behind), func(t *testing.T) {
			waiting := workloadOf(false)
			waiting.Status.Conditions = nil // in the queue, no quota yet
			w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns)), waiting)
			w.r.DetailInterval = 2 * time.Second
			w.r.Workers = 4
			ready := 4 // a queue its workers keep up with
			if behind {
				ready = 5
			}
			w.r.readyRuns = func() int { return ready }
			if _, err := w.reconcile(t, "r1"); err != nil {
				t.Fatal(err)
			}
			queued := w.run(t, "r1")
			w.r.noteWrite(queued) // written now
			// Kueue reserves quota; another controller's check is pending:
			// detail of the Queued phase, no brief step.
			wl := workloadOf(false)
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(wl), wl); err != nil {
				t.Fatal(err)
			}
			wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved",
				LastTransitionTime: metav1.NewTime(w.r.Clock.Now())}}
			wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "provisioning", State: kueue.CheckStatePending, LastTransitionTime: metav1.NewTime(w.r.Clock.Now())}}
			if err := w.c.Status().Update(ctx, wl); err != nil {
				t.Fatal(err)
			}
			w.after(3 * time.Second)
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			says := strings.Contains(got.Status.Message, "waiting for admission checks: provisioning")
			switch {
			case !behind && !says:
				t.Fatalf("3s after the last write, a controller that keeps up says %q, want the pending check", got.Status.Message)
			case behind && (got.ResourceVersion != queued.ResourceVersion || res.RequeueAfter != maxDetailInterval-3*time.Second):
				t.Fatalf("3s after the last write, a controller behind wrote %q (requeued after %s); want nothing, and a look in %s",
					got.Status.Message, res.RequeueAfter, maxDetailInterval-3*time.Second)
			}
			if behind {
				if got := w.lookAfter(t, maxDetailInterval-3*time.Second); !strings.Contains(got.Status.Message, "waiting for admission checks: provisioning") {
					t.Fatalf("%s after the last write, a controller behind says %q, want the pending check", maxDetailInterval, got.Status.Message)
				}
			}

			// Kueue admits it a second later: a phase, written at once.
			if err := w.c.Get(ctx, client.ObjectKeyFromObject(wl), wl); err != nil {
				t.Fatal(err)
			}
			wl.Status.AdmissionChecks[0].State = kueue.CheckStateReady
			wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue,
				Reason: "Admitted", LastTransitionTime: metav1.NewTime(w.r.Clock.Now())})
			if err := w.c.Status().Update(ctx, wl); err != nil {
				t.Fatal(err)
			}
			if got := w.lookAfter(t, time.Second); got.Status.Phase != taugridv1.PhaseAdmitted {
				t.Errorf("a second after the last write: %s (%q), want Admitted written at once", got.Status.Phase, got.Status.Message)
			}
		})
	}
}

// The controller's work queue is controller-runtime's priority queue, and
// behind counts its ready runs: those a worker could take now, not those
// waiting for their time (a detail's requeue).
func TestTheControllerIsBehindWhenMoreRunsAreReadyThanItHasWorkers(t *testing.T) {
	r := &RunReconciler{Workers: 2}
	if r.behind() {
		t.Fatal("behind before its queue is made")
	}
	q := r.newQueue(logr.Discard())("taurun", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if _, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); !ok {
		t.Fatalf("the queue is a %T, want controller-runtime's priority queue", q)
	}
	run := func(i int) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("r%d", i)}}
	}
	q.Add(run(1))
	q.Add(run(2))
	q.AddAfter(run(3), time.Hour)
	if r.behind() {
		t.Error("behind with 2 runs ready for 2 workers (and one waiting an hour)")
	}
	q.Add(run(4))
	if !r.behind() {
		t.Error("not behind with 3 runs ready for 2 workers")
	}
	q.Get()
	if r.behind() {
		t.Error("behind once a worker took one of the 3")
	}
}
