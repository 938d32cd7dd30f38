package reconciler

import (
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// submissionMemoTTL is how long a submission's status write is expected
// to take to reach the cache; a memo older than that is dropped, so a
// run whose cache never shows the write is looked at afresh.
const submissionMemoTTL = 30 * time.Second

// submissions remembers, per run, the last attempt whose submission this
// process wrote to the run's status. A reconcile working from a cached copy
// that does not show that attempt yet reads a copy older than its own
// write: submitting again would only be refused (AlreadyExists, then a
// Conflict on the status) after reading the tau file for nothing.
type submissions struct {
	mu sync.Mutex
	m  map[types.UID]submission
}

type submission struct {
	attempt int
	at      time.Time
}

// submissionsInit guards the lazy creation of a RunReconciler's memo.
var submissionsInit sync.Mutex

func (r *RunReconciler) submissions() *submissions {
	submissionsInit.Lock()
	defer submissionsInit.Unlock()
	if r.submitted == nil {
		r.submitted = &submissions{m: map[types.UID]submission{}}
	}
	return r.submitted
}

// cacheLagsSubmission reports a run whose cached copy does not show the
// attempt this process last submitted for it and recorded: its Job or
// RayJob is created, and the cache has not caught up with the status.
func (r *RunReconciler) cacheLagsSubmission(run *taugridv1.TauRun) bool {
	s := r.submissions()
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.m[run.UID]
	switch {
	case !ok:
		return false
	case len(run.Status.Attempts) < sub.attempt && r.Clock.Now().Sub(sub.at) < submissionMemoTTL:
		return true
	}
	delete(s.m, run.UID) // the cache shows it (or never will): forget it
	return false
}

// announceSubmitted is called once the status that records the submission
// of w is stored: only then is "Submitted" true, so only then is the
// event emitted, and the submission remembered.
func (r *RunReconciler) announceSubmitted(run *taugridv1.TauRun, w client.Object) {
	s := r.submissions()
	s.mu.Lock()
	s.m[run.UID] = submission{attempt: len(run.Status.Attempts), at: r.Clock.Now()}
	s.mu.Unlock()
	r.Recorder.Eventf(run, w, corev1.EventTypeNormal, ReasonSubmitted, "Submit", "submitted %s %s to queue %s",
		run.Status.Workload.Kind, w.GetName(), run.Status.Workload.Queue)
}
