package run

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unicode"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// DefaultDetailInterval is how long, after a run's last status write, a
// change that only adds detail to its phase waits to be written
// (cmd/tau-controller's --status-detail-interval).
const DefaultDetailInterval = 2 * time.Second

// detailOnly: what changed from base to run is only what a person reads
// of a phase in progress: the message, the conditions' messages, why the
// workload waits, its place in the queue and the name of Kueue's Workload
// for it, the nodes an attempt's pods are on. A new phase, a condition
// that turns, a workload recorded or admitted, an attempt started or
// ended: none is detail. An unchanged status is not detail either: there
// is nothing to hold back.
func detailOnly(base, run *taugridv1.TauRunStatus) bool {
	a, b := withoutDetail(*base), withoutDetail(*run)
	return equality.Semantic.DeepEqual(a, b) && !equality.Semantic.DeepEqual(base, run)
}

// withoutDetail is s with its detail blanked: s is a copy, and what is
// blanked is copied first (one level deep), so the run is not changed.
func withoutDetail(s taugridv1.TauRunStatus) taugridv1.TauRunStatus {
	s.Message = ""
	if s.Workload != nil {
		w := *s.Workload
		w.Reason, w.Position, w.Workload = "", nil, ""
		s.Workload = &w
	}
	s.Conditions = slices.Clone(s.Conditions)
	for i := range s.Conditions {
		s.Conditions[i].Message = ""
	}
	s.Attempts = slices.Clone(s.Attempts)
	for i := range s.Attempts {
		s.Attempts[i].Nodes = nil
	}
	return s
}

// maxDetailInterval bounds how far detailInterval stretches: a run that
// has waited an hour still shows its place in the queue as it was at most
// this long ago.
const maxDetailInterval = 30 * time.Second

// detailWait is how long the status change from base to run is held back:
// a change that is only detail, within detailInterval of the run's last
// status write, waits for the rest of it, and whatever the run shows then
// is written, once (a run passing through admission and pod start in a
// second is written at each phase, not at each sentence between); in a
// brief step (noteBriefStep) it waits until the step has lasted
// briefHold. 0: write now. Each write is dated by noteWrite.
func (r *RunReconciler) detailWait(base, run *taugridv1.TauRun) time.Duration {
	if r.DetailInterval <= 0 || !detailOnly(&base.Status, &run.Status) {
		return 0
	}
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	var wait time.Duration
	if at, ok := shared.MemoOf(&r.statusWrites).Get(key); ok {
		wait = r.detailInterval(run) - r.Clock.Now().Sub(at)
	}
	if b, ok := shared.MemoOf(&r.briefSteps).Get(key); ok {
		wait = max(wait, briefHold-r.Clock.Now().Sub(b.since))
	}
	return max(0, wait)
}

// briefHold is how long a run may be in a brief step before its detail
// says so. A brief step is one the cluster passes in a second or a few
// when all is well, each sentence about it soon stale: Kueue making the
// Workload for a submitted Job; a workload that holds its quota waiting
// on TauGrid's own admission checks alone (taugrid-policy-<platform>;
// the check decides in about a second, and Kueue admits); each step of
// an admitted attempt's start that nothing holds (Kueue unsuspending the
// Job, the Job creating its pods, the scheduler placing them, their
// containers starting). The run's next write is then its next phase
// (Queued, Admitted, Running), not a sentence about each step between.
// hack/scale, 10,000 runs: 2.7 status writes a run while Admitted, 1.7
// of them such sentences, when each waited DetailInterval only. A step
// that lasts is written once it has lasted briefHold, as any wait; a
// wait that is no brief step (a pod no node fits, an image that does
// not pull, a place in a queue, another controller's check) is written
// at the detail interval, or at once when a condition turns.
const briefHold = 5 * time.Second

// brief is the brief step a run was last seen in, and since when.
type brief struct {
	step  string
	since time.Time
}

// noteBriefStep records when the run was first seen in brief step step
// (briefHold), and forgets it once it is in none ("").
func (r *RunReconciler) noteBriefStep(run *taugridv1.TauRun, step string) {
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	memo := shared.MemoOf(&r.briefSteps)
	if step == "" {
		memo.Forget(key)
		return
	}
	if b, ok := memo.Get(key); !ok || b.step != step {
		memo.Put(key, brief{step: step, since: r.Clock.Now()})
	}
}

// briefStep names the brief step (briefHold) the run is in, at phase p
// with wait (Queued) and workload wl; "" for none. A start's step is its
// sentence with the counts in it blanked: pods moving on within a step
// ("1 of 8 running", then "2 of 8") are that step still, and a Job that
// Kueue took 20 s to unsuspend does not make its pods' first second a
// step that has lasted.
func briefStep(p Progress, wait *runs.Explanation, wl *kueue.Workload) string {
	switch {
	case p.Phase == taugridv1.PhaseQueued && wait != nil && (wait.Kind == runs.WaitUnseen || waitsOnOwnCheck(*wait, wl)):
		return string(wait.Kind)
	case p.Phase == taugridv1.PhaseAdmitted && !p.Held:
		return strings.Map(func(c rune) rune {
			if unicode.IsDigit(c) {
				return '#'
			}
			return c
		}, p.Message)
	}
	return ""
}

// waitsOnOwnCheck: ex says wl holds its quota and waits for admission
// checks, and every check not ready yet is TauGrid's own.
func waitsOnOwnCheck(ex runs.Explanation, wl *kueue.Workload) bool {
	if ex.Kind != runs.WaitAdmissionChecks || wl == nil {
		return false
	}
	for _, ac := range wl.Status.AdmissionChecks {
		if ac.State != kueue.CheckStateReady && !strings.HasPrefix(string(ac.Name), taugridv1.PolicyAdmissionCheck+"-") {
			return false
		}
	}
	return true
}

// detailInterval is DetailInterval for a phase entered a moment ago, and
// half the time the run has been in its phase once that is longer, up to
// maxDetailInterval: a queue of a thousand runs moves every run's place at
// each admission, and a run that has waited a minute reads as well with
// its place 30 s old as 2 s old, while a run that has just moved shows
// each step. hack/scale, 1,000 runs: TauRun writes per run ended (see
// docs/benchmarks.md).
//
// While the controller is behind (behind), it is maxDetailInterval: the
// workers' time goes to submissions and phases first.
func (r *RunReconciler) detailInterval(run *taugridv1.TauRun) time.Duration {
	if r.behind() {
		return max(r.DetailInterval, maxDetailInterval)
	}
	since := shared.Since(run, run.Status.Phase)
	if since.IsZero() {
		return r.DetailInterval
	}
	return max(r.DetailInterval, min(r.Clock.Now().Sub(since)/2, maxDetailInterval))
}

// behind: more runs are ready in the controller's work queue than it has
// workers, each waiting for a worker to be free. A worker's time then goes
// to what no run can do without: a new run's submission, which gives it
// its first phase, and each phase change, written at once as ever. A
// sentence that only adds detail to a phase waits maxDetailInterval after
// the run's last write, and is written then with what the run shows: a
// status write holds a worker for an API round trip (0.6-0.7 s on the
// API server with 10,000 runs, hack/scale), and there, before this,
// detail was about 2 of a run's 7 status writes, while thousands of new
// runs waited for a worker to give them any phase at all. A controller
// that keeps up writes detail as detailInterval says.
func (r *RunReconciler) behind() bool {
	return r.readyRuns != nil && r.readyRuns() > cmp.Or(r.Workers, DefaultRunWorkers)
}

// noteWrite dates a status write to run; an ended run's date is dropped,
// as nothing about it is detail any more, with its last GPU reading's.
func (r *RunReconciler) noteWrite(run *taugridv1.TauRun) {
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	if run.Status.Phase.Final() {
		shared.MemoOf(&r.statusWrites).Forget(key)
		shared.MemoOf(&r.usageReads).Forget(key)
		shared.MemoOf(&r.briefSteps).Forget(key)
		return
	}
	shared.MemoOf(&r.statusWrites).Put(key, r.Clock.Now())
}
