package run

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/controllers/shared"
)

// submissionMemoTTL is how long a submission's status write is expected
// to take to reach the cache; a memo older than that is dropped, so a
// run whose cache never shows the write is looked at afresh.
const submissionMemoTTL = 30 * time.Second

// submission is, per run, the last attempt whose submission this process
// wrote to the run's status (RunReconciler.submitted). A reconcile working
// from a cached copy that does not show that attempt yet reads a copy
// older than its own write: submitting again would only be refused
// (AlreadyExists, then a Conflict on the status) after reading the tau
// file for nothing.
type submission struct {
	attempt int
	at      time.Time
}

// cacheLagsSubmission reports a run whose cached copy does not show the
// attempt this process last submitted for it and recorded: its Job or
// RayJob is created, and the cache has not caught up with the status.
func (r *RunReconciler) cacheLagsSubmission(run *taugridv1.TauRun) bool {
	subs := shared.MemoOf(&r.submitted)
	sub, ok := subs.Get(run.UID)
	switch {
	case !ok:
		return false
	case len(run.Status.Attempts) < sub.attempt && r.Clock.Now().Sub(sub.at) < submissionMemoTTL:
		return true
	}
	subs.Forget(run.UID) // the cache shows it (or never will): forget it
	return false
}

// announceSubmitted is called once the status that records the submission
// of w is stored: only then is "Submitted" true, so only then is the
// event emitted, and the submission remembered.
func (r *RunReconciler) announceSubmitted(run *taugridv1.TauRun, w client.Object) {
	shared.MemoOf(&r.submitted).Put(run.UID, submission{attempt: len(run.Status.Attempts), at: r.Clock.Now()})
	r.Recorder.Eventf(run, w, corev1.EventTypeNormal, ReasonSubmitted, "Submit", "submitted %s %s to queue %s",
		run.Status.Workload.Kind, w.GetName(), run.Status.Workload.Queue)
}
