package run

import (
	"context"
	"fmt"
	"regexp"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// PreemptionOf is Kueue's preemption of an attempt's Workload, as the
// record to keep on the attempt, or nil. Kueue shows it as an Evicted
// condition with reason Preempted and a Preempted condition; once it
// readmits the workload it resets both, and only the eviction counted in
// the workload's scheduling stats says it happened. A Workload belongs to
// one attempt, so any preemption it counts ended that attempt.
func PreemptionOf(wl *kueue.Workload, now time.Time) *taugridv1.Preemption {
	if wl == nil {
		return nil
	}
	rec := &taugridv1.Preemption{Time: metav1.NewTime(now)}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil {
		rec.Message = c.Message // kept after a reset: it names the preemptor
		if c.Status == metav1.ConditionTrue {
			return rec
		}
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason == kueue.WorkloadEvictedByPreemption {
		if rec.Message == "" {
			rec.Message = c.Message
		}
		return rec
	}
	if wl.Status.SchedulingStats != nil {
		for _, e := range wl.Status.SchedulingStats.Evictions {
			if e.Reason == kueue.WorkloadEvictedByPreemption && e.Count > 0 {
				return rec
			}
		}
	}
	return nil
}

// AttemptEnd is how the current attempt stands.
type AttemptEnd string

// What DecideAttemptEnd can say.
const (
	AttemptGoesOn           AttemptEnd = "GoesOn"           // nothing ended it from outside: follow its progress
	AttemptRecordPreemption AttemptEnd = "RecordPreemption" // Kueue preempted it: record that on the attempt first, act once the record is read back
	AttemptPreempted        AttemptEnd = "Preempted"        // recorded as preempted: end it as Preempted, retry per policy
	AttemptDeleted          AttemptEnd = "Deleted"          // its Job or RayJob is gone and nothing recorded says why
	AttemptRecordWorkerLoss AttemptEnd = "RecordWorkerLoss" // MultiKueue took it off its worker: record that first, act once the record is read back
	AttemptWorkerLost       AttemptEnd = "WorkerLost"       // recorded as having lost its worker: end it as WorkerLost, retry per policy
)

// AttemptView is what one reconcile knows of the current attempt.
type AttemptView struct {
	// Recorded is the preemption recorded on the attempt, if any.
	Recorded *taugridv1.Preemption
	// Gone: the attempt's Job or RayJob is not found.
	Gone bool
	// Workload is Kueue's Workload for it, nil when gone or not made yet.
	Workload *kueue.Workload
	// Succeeded: the Job or RayJob reports success.
	Succeeded bool
	// WorkerLossRecorded: the attempt is recorded as having lost the
	// worker cluster it was dispatched to.
	WorkerLossRecorded bool
	// LostWorker is the worker the Workload shows the attempt was taken
	// off (lostWorker), "" if none.
	LostWorker string
}

// DecideAttemptEnd decides from recorded facts first and from the cluster
// only to record new ones, so the order in which the reconciler sees the
// Workload's eviction and the job's deletion cannot change the verdict:
// TauGrid deletes a preempted attempt's job only once the preemption is on
// the attempt, so every later look finds it recorded, however stale its
// view of the Workload or the job. A job that succeeded succeeded,
// whatever else happened to it.
func DecideAttemptEnd(v AttemptView) AttemptEnd {
	switch {
	case v.Succeeded:
		return AttemptGoesOn
	case v.Recorded != nil:
		return AttemptPreempted
	case v.WorkerLossRecorded:
		return AttemptWorkerLost
	case PreemptionOf(v.Workload, time.Time{}) != nil:
		return AttemptRecordPreemption
	case v.LostWorker != "":
		return AttemptRecordWorkerLoss
	case v.Gone:
		return AttemptDeleted
	}
	return AttemptGoesOn
}

// attemptEnd decides how the current attempt stands (DecideAttemptEnd)
// and records a preemption it sees for the first time. When the job is
// gone it looks the Workload up by its owner's name, around the cache.
func (r *RunReconciler) attemptEnd(ctx context.Context, run *taugridv1.TauRun, obs *Observed, gone, succeeded bool) (AttemptEnd, error) {
	n := len(run.Status.Attempts)
	if n == 0 {
		return AttemptGoesOn, nil
	}
	a := &run.Status.Attempts[n-1]
	if gone && obs.Workload == nil {
		wl, err := r.WorkloadOwnedBy(ctx, run.Namespace, run.Status.Workload.Name)
		if err != nil {
			return "", err
		}
		obs.Workload = wl
	}
	lost := lostWorker(run, obs.Workload)
	end := DecideAttemptEnd(AttemptView{Recorded: a.Preemption, Gone: gone, Workload: obs.Workload, Succeeded: succeeded,
		WorkerLossRecorded: workerLossRecorded(a), LostWorker: lost})
	switch end {
	case AttemptRecordPreemption:
		a.Preemption = PreemptionOf(obs.Workload, r.Clock.Now())
	case AttemptRecordWorkerLoss:
		recordWorkerLoss(run, lost, obs.WorkerErr)
	}
	return end, nil
}

// WorkloadOwnedBy finds the Kueue Workload whose controller is the named
// Job or RayJob, read from the API server where the reconciler has a
// reader around the cache; nil when there is none.
func (r *RunReconciler) WorkloadOwnedBy(ctx context.Context, namespace, job string) (*kueue.Workload, error) {
	var wls kueue.WorkloadList
	if err := r.uncached().List(ctx, &wls, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for i := range wls.Items {
		if ref := metav1.GetControllerOfNoCopy(&wls.Items[i]); ref != nil && ref.Name == job && (ref.Kind == "Job" || ref.Kind == "RayJob") {
			return &wls.Items[i], nil
		}
	}
	return nil, nil
}

// staleRun reports a run read from a cache that lags the API server, as
// it does just after TauGrid ended an attempt and deleted its job: acting
// on the old status would end the attempt twice, or call TauGrid's own
// deletion a failure. Without a reader around the cache, reads are fresh.
func (r *RunReconciler) staleRun(ctx context.Context, run *taugridv1.TauRun) (bool, error) {
	if r.APIReader == nil {
		return false, nil
	}
	live := &taugridv1.TauRun{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(run), live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return live.ResourceVersion != run.ResourceVersion, nil
}

// kueuePreemption picks the preemptor's job UID and Kueue's reason out of
// the Preempted condition's message, "Preempted to accommodate a workload
// (UID: …, JobUID: …) due to <reason>; preemptor path: …".
var kueuePreemption = regexp.MustCompile(`JobUID: ([^)]*)\) due to ([^;]*)`)

// preemptor says, in tenant terms, what preempted a workload of namespace
// viewer, from Kueue's message as recorded on the attempt: "preempted by
// run team-a/big-7f3k2 (prioritization in the ClusterQueue)" for the
// viewer's own team, "preempted by a run of another team (...)" for
// another's, whose runs and namespaces are never named. It returns ""
// when the message names no job, and names a job of the viewer's that is
// not a TauGrid run by its Workload.
func (r *RunReconciler) preemptor(ctx context.Context, msg, viewer string) (string, error) {
	m := kueuePreemption.FindStringSubmatch(msg)
	if m == nil || m[1] == "" {
		return "", nil
	}
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.MatchingLabels{shared.KueueJobUID: m[1]}); err != nil {
		return "", err
	}
	if len(wls.Items) == 0 {
		return fmt.Sprintf("preempted by another workload (%s)", m[2]), nil
	}
	w := &wls.Items[0]
	run, isRun := runOfWorkload(w)
	switch {
	case w.Namespace != viewer:
		// Another team's: what it is, never whose.
		return fmt.Sprintf("preempted by %s (%s)", workloadWords(w, viewer, isRun), m[2]), nil
	case isRun:
		return fmt.Sprintf("preempted by run %s/%s (%s)", w.Namespace, run, m[2]), nil
	}
	return fmt.Sprintf("preempted by workload %s/%s (%s)", w.Namespace, w.Name, m[2]), nil
}
