package sealing

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
)

func TestABundleSaysHowItsAttemptEnded(t *testing.T) {
	cases := map[string]struct {
		run     *builders.TauRunBuilder
		attempt int
		want    string
	}{
		"the last attempt of a succeeded run": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseSucceeded, "").Attempt("r-1", started, ended, ""), attempt: 1, want: "Succeeded"},
		"the last attempt of a failed run": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseFailed, "").Attempt("r-1", started, ended, taugridv1.FailureUserError), attempt: 1, want: "Failed"},
		"the last attempt of a cancelled run": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseCancelled, "").Attempt("r-1", started, ended, ""), attempt: 1, want: "Cancelled"},
		"an attempt followed by another": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseSucceeded, "").Attempt("r-1", started, ended, taugridv1.FailurePreempted).
				Attempt("r-2", ended, ended, ""), attempt: 1, want: "Retried"},
		"a failed attempt of a run still going is retried": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseQueued, "").Attempt("r-1", started, ended, taugridv1.FailureNodeLost), attempt: 1, want: "Retried"},
		"an attempt ended without a class while the run goes on": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseRunning, "").Attempt("r-1", started, ended, ""), attempt: 1, want: "Ended"},
	}
	for name, tc := range cases {
		if got := outcome(tc.run.Obj(), tc.attempt); got != tc.want {
			t.Errorf("%s: outcome %q, want %q", name, got, tc.want)
		}
	}
}

// An attempt dispatched to a worker cluster this controller cannot read
// is sealed from the manager's record, and the bundle says what is missing.
func TestAnAttemptOnAnUnreadableWorkerIsSealedWithANote(t *testing.T) {
	run := sealingRun().Obj()
	run.Status.Attempts[0].Cluster = "worker-1"
	w := newSealWorld(t, fakeLogs{}, researchRepo(), hfSecret(), run, attemptJob(), attemptWorkload(), attemptPod(0))
	if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	_, rec, _ := w.bundle(t, 1)
	want := []string{"attempt 1 ran on worker cluster worker-1, which this controller is not set up to read: its pods, nodes and logs are not recorded"}
	if d := cmp.Diff(want, rec.Notes); d != "" {
		t.Errorf("notes (-want +got):\n%s", d)
	}
	if len(rec.Pods) != 0 || len(rec.Logs) != 0 {
		t.Errorf("pods %+v, logs %+v read from the manager for a worker's attempt", rec.Pods, rec.Logs)
	}
}
