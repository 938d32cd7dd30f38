package run

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const resumeAt = "2026-06-01T11:59:00Z" // tau resume sets the time

// failedOnce is run r1, failed: its one attempt, r1-1, ended a second
// ago (its retry backoff not passed) with a UserError.
func failedOnce() *builders.TauRunBuilder {
	return builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseFailed, "failed (UserError): container main exited with code 1").
		Workload("Job", "r1-1", "team-a-runs").Attempt("r1-1", sharedtest.Now.Add(-time.Hour), sharedtest.Now.Add(-time.Second), taugridv1.FailureUserError).
		Condition(taugridv1.ConditionStalled, metav1.ConditionTrue, ReasonFailed, "failed").
		Condition(taugridv1.ConditionReady, metav1.ConditionFalse, ReasonFailed, "failed")
}

// A resume request (the annotation tau resume sets) takes a failed run
// back to Pending and submits its next attempt at once, whatever its retry
// policy says; each request once, and only for a run that failed after it
// ran.
func TestAResumeRequestRunsAFailedRunAgain(t *testing.T) {
	cases := map[string]struct {
		run     *taugridv1.TauRun
		resumed bool
	}{
		"a failed run asked to resume":               {run: failedOnce().Annotation(taugridv1.AnnotationResume, resumeAt).Obj(), resumed: true},
		"a request already handled":                  {run: failedOnce().Annotation(taugridv1.AnnotationResume, resumeAt).ResumeHandled(resumeAt).Obj()},
		"a failed run never asked":                   {run: failedOnce().Obj()},
		"a cancelled run":                            {run: failedOnce().Annotation(taugridv1.AnnotationResume, resumeAt).Cancel().Obj()},
		"a run that succeeded has nothing to resume": {run: failedOnce().Phase(taugridv1.PhaseSucceeded, "succeeded").Annotation(taugridv1.AnnotationResume, resumeAt).Obj()},
		"a run that never ran was invalid: nothing to resume": {
			run: builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseFailed, "tau.yaml:3:1: unknown field").
				Annotation(taugridv1.AnnotationResume, resumeAt).Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, nil, tc.run)
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if !tc.resumed {
				if got.Status.Phase != tc.run.Status.Phase || len(w.jobs(t)) != 0 || len(got.Status.Attempts) != len(tc.run.Status.Attempts) {
					t.Errorf("phase %s, %d Jobs, %d attempts: the run was resumed", got.Status.Phase, len(w.jobs(t)), len(got.Status.Attempts))
				}
				if e := w.reasons(); len(e) != 0 {
					t.Errorf("events %v, want none", e)
				}
				return
			}
			var phases []taugridv1.RunPhase
			for _, p := range got.Status.Phases {
				phases = append(phases, p.Phase)
			}
			if diff := cmp.Diff([]taugridv1.RunPhase{taugridv1.PhasePending, taugridv1.PhaseQueued}, phases); diff != "" {
				t.Errorf("phases entered (-want +got):\n%s", diff)
			}
			if n := len(got.Status.Attempts); n != 2 || got.Status.Attempts[1].Workload != "r1-2" {
				t.Errorf("attempts %+v, want a second, of r1-2", got.Status.Attempts)
			}
			if j := w.jobs(t); len(j) != 1 || j[0].Name != "r1-2" {
				t.Errorf("Jobs %v, want r1-2 submitted", j)
			}
			if got.Status.LastHandledResume != resumeAt {
				t.Errorf("lastHandledResume %q, want %q", got.Status.LastHandledResume, resumeAt)
			}
			if c := condition(got, taugridv1.ConditionStalled); c != "" {
				t.Errorf("Stalled %q left on a resumed run", c)
			}
			if c := condition(got, taugridv1.ConditionReady); c != "False/"+ReasonResumed {
				t.Errorf("Ready %q, want False/Resumed", c)
			}
			if diff := cmp.Diff([]string{"Normal Resumed", "Normal Submitted"}, w.reasons()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if res.RequeueAfter != submitRecheck || got.Status.ObservedGeneration != got.Generation {
				t.Errorf("requeue after %s, observedGeneration %d; want submitRecheck, %d", res.RequeueAfter, got.Status.ObservedGeneration, got.Generation)
			}
		})
	}
}

// TestEachResumeRequestResumesOnce: a resumed run that fails again stays
// failed until tau resume is asked again.
func TestEachResumeRequestResumesOnce(t *testing.T) {
	w := newRunWorld(t, nil, failedOnce().Annotation(taugridv1.AnnotationResume, resumeAt).Obj())
	failAgain := func() {
		t.Helper()
		if _, err := w.reconcile(t, "r1"); err != nil {
			t.Fatal(err)
		}
		run := w.run(t, "r1")
		if run.Status.Phase != taugridv1.PhaseQueued {
			t.Fatalf("phase %s (%s), want the resumed run queued", run.Status.Phase, run.Status.Message)
		}
		now := metav1.NewTime(sharedtest.Now)
		run.Status.Phase = taugridv1.PhaseFailed
		run.Status.Attempts[len(run.Status.Attempts)-1].EndTime = &now
		if err := w.c.Status().Update(t.Context(), run); err != nil {
			t.Fatal(err)
		}
	}
	failAgain()
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if n := len(w.jobs(t)); n != 1 {
		t.Fatalf("%d Jobs after the resumed attempt failed, want 1: the request resumed twice", n)
	}
	run := w.run(t, "r1")
	run.Annotations[taugridv1.AnnotationResume] = "2026-06-01T12:30:00Z"
	if err := w.c.Update(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	failAgain()
	if n := len(w.run(t, "r1").Status.Attempts); n != 3 {
		t.Errorf("%d attempts, want a third for the second request", n)
	}
}
