package run

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=localqueues;clusterqueues,verbs=get;list;watch

// maxAhead is how many workloads ahead of a run its explanation names.
const maxAhead = 3

// queueState reads a workload's queue from the cache: its ClusterQueue and
// its position among that queue's pending workloads. It makes no API calls
// beyond the informers' lists.
func (r *RunReconciler) queueState(ctx context.Context, wl *kueue.Workload) runs.QueueState {
	var q runs.QueueState
	lq := &kueue.LocalQueue{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, lq); err != nil {
		return q
	}
	cq := &kueue.ClusterQueue{}
	if err := r.Get(ctx, types.NamespacedName{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		return q
	}
	q.ClusterQueue = cq
	feeds, err := r.feeding(ctx, lq.Spec.ClusterQueue)
	if err != nil {
		return q
	}
	var pending, admitted []*kueue.Workload
	now := r.Clock.Now()
	for ns, queues := range feeds {
		// Only the LocalQueues that feed this ClusterQueue are read, and
		// of each only the Workloads Kueue has not finished
		// (shared.IndexWorkloadQueue): not every Workload of the cluster,
		// nor every one a namespace has kept, for every queued run
		// (hack/scale, 10,000 runs: 22 MB listed per pass of the queued
		// runs, then 11% of the controller's CPU matching a tenant's).
		items, err := r.queueWorkloads(ctx, ns, queues)
		if err != nil {
			return runs.QueueState{ClusterQueue: cq}
		}
		for i := range items {
			w := &items[i]
			switch {
			case !queues[string(w.Spec.QueueName)]:
			case isPending(w):
				pending = append(pending, w)
			case meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadAdmitted) && !meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished):
				admitted = append(admitted, w)
			}
		}
	}
	h := r.holdingOf(ctx, cq, admitted, now)
	holding := make([]runs.Slot, len(h.slots))
	for i, s := range h.slots {
		holding[i] = s.Slot
		if !s.start.IsZero() {
			holding[i].Elapsed = now.Sub(s.start)
		}
	}
	if h.freedBy != nil {
		q.FreesBy, q.FreedBy = h.freesBy, describeWorkload(h.freedBy, wl.Namespace)
	}
	q.Position, q.Pending, q.Ahead = positionIn(pending, wl)
	q.Now = now
	if q.Position > 0 {
		q.StartsAt = r.startEstimate(ctx, cq, holding, pending[:q.Position], now)
	}
	return q
}

// DefaultHoldersKept is how long cmd/tau-controller's run reconciler
// reuses a look at what holds a ClusterQueue's quota (HoldersKept): each
// queued run's look read the time limit, the start and the reported
// progress of every admitted run of its queue from the cache, so a pass
// over a queue's queued runs cost their number times the runs holding it
// (hack/scale, 10,000 runs: queueState, most of it that, was 19% of the
// controller's CPU at the 2,500 row, with 2,660 admitted runs holding
// their queues). An estimate of a start a minute or more away moves
// nothing a researcher reads within a second.
const DefaultHoldersKept = time.Second

// holding is what holds a ClusterQueue's quota, as read at a time: each
// admitted run's slot (its Elapsed set by the reader, from start) and the
// one whose time limit frees its GPUs first.
type holding struct {
	version string // the ClusterQueue's resourceVersion
	at      time.Time
	slots   []heldSlot
	freesBy time.Time
	freedBy *kueue.Workload // named to each reader as it may read it (describeWorkload)
}

type heldSlot struct {
	runs.Slot
	start time.Time // zero: no time limit known, so no elapsed time reasoned from
}

// holdingOf is what holds cq: from a look at the same ClusterQueue (the
// same resourceVersion: Kueue writes the ClusterQueue as it admits and
// releases workloads) less than HoldersKept ago, or read from admitted.
// With HoldersKept 0 nothing is kept.
func (r *RunReconciler) holdingOf(ctx context.Context, cq *kueue.ClusterQueue, admitted []*kueue.Workload, now time.Time) holding {
	var kept *shared.Memo[string, holding]
	if r.HoldersKept > 0 {
		kept = shared.MemoOf(&r.holding)
		if h, ok := kept.Get(cq.Name); ok && h.version == cq.ResourceVersion && !now.Before(h.at) && now.Sub(h.at) < r.HoldersKept {
			return h
		}
	}
	h := holding{version: cq.ResourceVersion, at: now, slots: make([]heldSlot, 0, len(admitted))}
	for _, w := range admitted {
		slot := heldSlot{Slot: runs.Slot{Run: w.Namespace + "/" + w.Name, GPUs: runs.WorkloadGPUs(w)}}
		if limit, start, ok := r.deadline(ctx, w); ok {
			if start != nil {
				end := start.Add(limit)
				if h.freedBy == nil || end.Before(h.freesBy) {
					freed := *w // not the list's element: the list is not kept
					h.freesBy, h.freedBy = end, &freed
				}
			} else {
				// Not started yet: counted from its admission, not
				// from now, so the estimate holds still between looks.
				start = &meta.FindStatusCondition(w.Status.Conditions, kueue.WorkloadAdmitted).LastTransitionTime
			}
			slot.Limit, slot.start = limit, start.Time
			slot.Progress, slot.ProgressAt = r.reportedProgress(ctx, w, start.Time)
		}
		h.slots = append(h.slots, slot)
	}
	if kept != nil {
		kept.Put(cq.Name, h)
	}
	return h
}

// startEstimate is when the last of waiting (the run whose queue is
// read; the others are ahead of it, in order) starts if the runs holding
// the ClusterQueue's GPUs and those ahead end by their time limits: zero
// when it asks no GPUs, when a run has no limit to reason from, or when
// the start is not a minute away.
func (r *RunReconciler) startEstimate(ctx context.Context, cq *kueue.ClusterQueue, holding []runs.Slot, waiting []*kueue.Workload, now time.Time) time.Time {
	q := runs.GPUQueue(cq)
	q.Running = holding
	q.Waiting = make([]runs.Slot, len(waiting))
	kept := r.waitingSlots()
	for i, w := range waiting {
		q.Waiting[i] = r.waitingSlot(ctx, kept, w)
	}
	starts := runs.Estimate(*q)
	last := starts[len(starts)-1]
	if q.Waiting[len(q.Waiting)-1].GPUs == 0 || !last.Known() || last.In < time.Minute {
		return time.Time{}
	}
	return now.Add(last.In)
}

// waitingKept is how many waiting workloads' slots are kept.
const waitingKept = 16384

// waitingInit guards the creation of a reconciler's kept waiting slots on
// first use, so a reconciler built as a struct literal needs no
// constructor.
var waitingInit sync.Mutex

// waitingSlots is the reconciler's kept waiting slots (waitingSlot).
func (r *RunReconciler) waitingSlots() *lru.Cache {
	waitingInit.Lock()
	defer waitingInit.Unlock()
	if r.waiting == nil {
		r.waiting = lru.New(waitingKept)
	}
	return r.waiting
}

// waitingSlot is waiting workload w as the estimate sees it: its GPUs and
// time limit, kept in kept by its UID once read. Every queued run estimates its
// start from all the runs ahead of it, and neither a Workload's pods nor
// its Job's limit change once made, so each is read from the cache once,
// not at every look of every run behind it
// (BenchmarkEstimatingAThousandPendingRuns).
func (r *RunReconciler) waitingSlot(ctx context.Context, kept *lru.Cache, w *kueue.Workload) runs.Slot {
	if s, ok := kept.Get(w.UID); ok {
		return s.(runs.Slot)
	}
	s := runs.Slot{Run: w.Namespace + "/" + w.Name, GPUs: runs.WorkloadGPUs(w)}
	limit, _, ok := r.deadline(ctx, w)
	if ok { // a Job not in the cache yet is read again next time
		s.Limit = limit
		kept.Add(w.UID, s)
	}
	return s
}

// feeding names the LocalQueues that feed a ClusterQueue, by namespace.
func (r *RunReconciler) feeding(ctx context.Context, cq kueue.ClusterQueueReference) (map[string]map[string]bool, error) {
	var lqs kueue.LocalQueueList
	if err := r.List(ctx, &lqs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	feeds := map[string]map[string]bool{}
	for _, l := range lqs.Items {
		if l.Spec.ClusterQueue != cq {
			continue
		}
		if feeds[l.Namespace] == nil {
			feeds[l.Namespace] = map[string]bool{}
		}
		feeds[l.Namespace][l.Name] = true
	}
	return feeds, nil
}

// queueWorkloads are the Workloads of namespace ns in queues that Kueue
// has not finished, from the cache's index (Indexed); without one, all
// of the namespace's, which the caller sorts out.
func (r *RunReconciler) queueWorkloads(ctx context.Context, ns string, queues map[string]bool) ([]kueue.Workload, error) {
	if !r.Indexed {
		var wls kueue.WorkloadList
		err := r.List(ctx, &wls, client.InNamespace(ns), client.UnsafeDisableDeepCopy)
		return wls.Items, err
	}
	var items []kueue.Workload
	for queue := range queues {
		var wls kueue.WorkloadList
		if err := r.List(ctx, &wls, client.InNamespace(ns), client.MatchingFields{shared.IndexWorkloadQueue: queue}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		items = append(items, wls.Items...)
	}
	return items, nil
}

// isPending: waiting for quota, neither reserved nor finished.
func isPending(w *kueue.Workload) bool {
	return w.DeletionTimestamp.IsZero() && (w.Spec.Active == nil || *w.Spec.Active) &&
		!meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadQuotaReserved) &&
		!meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
}

// positionIn orders pending workloads as Kueue's BestEffortFIFO and
// StrictFIFO queues do (higher priority first, then older) and returns
// wl's 1-based place, the number pending, and who is just ahead.
func positionIn(pending []*kueue.Workload, wl *kueue.Workload) (int, int, []string) {
	sort.SliceStable(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if pa, pb := priority(a), priority(b); pa != pb {
			return pa > pb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for i, w := range pending {
		if w.UID == wl.UID && w.Namespace == wl.Namespace && w.Name == wl.Name {
			var ahead []string
			for j := max(0, i-maxAhead); j < i; j++ {
				ahead = append(ahead, describeWorkload(pending[j], wl.Namespace))
			}
			return i + 1, len(pending), ahead
		}
	}
	return 0, len(pending), nil
}

func priority(w *kueue.Workload) int32 {
	if w.Spec.Priority != nil {
		return *w.Spec.Priority
	}
	return 0
}

// describeWorkload names a workload as a researcher of namespace viewer
// knows it: their own team's by its run and priority, another team's by
// what it is and its priority only. Tenants are strangers: no text one
// reads names another's runs or namespaces.
func describeWorkload(w *kueue.Workload, viewer string) string {
	_, isRun := runOfWorkload(w)
	return fmt.Sprintf("%s (priority %d)", workloadWords(w, viewer, isRun), priority(w))
}

// workloadWords is what a researcher of namespace viewer may read of
// workload w: its namespace and run (or name) when it is their team's,
// "a run of another team" (or "a workload of another team") when not.
func workloadWords(w *kueue.Workload, viewer string, isRun bool) string {
	run, _ := runOfWorkload(w)
	switch {
	case w.Namespace != viewer && isRun:
		return "a run of another team"
	case w.Namespace != viewer:
		return "a workload of another team"
	case isRun:
		return w.Namespace + "/run " + run
	}
	return w.Namespace + "/" + w.Name
}

// preemptions counts the run's attempts that ended preempted.
func preemptions(run *taugridv1.TauRun) int {
	n := 0
	for _, a := range run.Status.Attempts {
		if a.FailureClass == string(taugridv1.FailurePreempted) {
			n++
		}
	}
	return n
}

// queueDeadlines ends a waiting run that can never be admitted, or that
// waited longer than its max_queue_time, releasing its place in the queue;
// done reports that it did. Otherwise it says when to look again.
func (r *RunReconciler) queueDeadlines(ctx context.Context, run *taugridv1.TauRun, ex runs.Explanation) (done bool, after time.Duration, err error) {
	msg := ""
	if ex.Kind == runs.WaitInfeasible {
		msg = ex.Short
	} else {
		plan, err := r.limits(ctx, run)
		if errors.Is(err, errUnplannable) {
			return false, 0, nil // no limit applies; the next submission says why
		}
		if err != nil || plan.MaxQueueTime <= 0 {
			return false, 0, err
		}
		start := shared.Since(run, taugridv1.PhaseQueued)
		if run.Status.Phase != taugridv1.PhaseQueued || start.IsZero() {
			return false, plan.MaxQueueTime, nil
		}
		waited := r.Clock.Now().Sub(start)
		if waited < plan.MaxQueueTime {
			return false, plan.MaxQueueTime - waited, nil
		}
		msg = fmt.Sprintf("waited %s in the queue, the limit (limits.max_queue_time) is %s: %s", waited.Round(time.Second), plan.MaxQueueTime, ex.Short)
	}
	if err := r.deleteWorkload(ctx, run); err != nil {
		return false, 0, err
	}
	if n := len(run.Status.Attempts); n > 0 {
		a := &run.Status.Attempts[n-1]
		now := metav1.NewTime(r.Clock.Now())
		a.EndTime, a.Reason = &now, msg
	}
	run.Status.Workload.Reason = ex.Long
	r.fail(run, ReasonFailed, msg)
	return true, 0, nil
}

// startDeadline reports an admitted attempt whose pods are still not
// running after the platform's start deadline, or when to look again.
func (r *RunReconciler) startDeadline(ctx context.Context, run *taugridv1.TauRun) (late bool, after time.Duration, err error) {
	plan, err := r.limits(ctx, run)
	if errors.Is(err, errUnplannable) {
		return false, 0, nil // no limit applies; the next submission says why
	}
	if err != nil || plan.StartDeadline <= 0 {
		return false, 0, err
	}
	start := shared.Since(run, taugridv1.PhaseAdmitted)
	if run.Status.Phase != taugridv1.PhaseAdmitted || start.IsZero() {
		return false, plan.StartDeadline, nil
	}
	waited := r.Clock.Now().Sub(start)
	if waited < plan.StartDeadline {
		return false, plan.StartDeadline - waited, nil
	}
	return true, 0, nil
}

// jobEndedInFailure reports a workload that ended in failure by itself.
func jobEndedInFailure(o Observed) bool {
	p, done := finished(o)
	return done && p.Phase == taugridv1.PhaseFailed
}

// reportedProgress is how far the run whose attempt holds w said it was
// (runs.ReportedProgress), from the cache; 0 for a workload no run of
// TauGrid's holds.
func (r *RunReconciler) reportedProgress(ctx context.Context, w *kueue.Workload, start time.Time) (float64, time.Duration) {
	owner := metav1.GetControllerOfNoCopy(w)
	if owner == nil {
		return 0, 0
	}
	name, ok := render.RunOfWorkload(owner.Name)
	if !ok {
		return 0, 0
	}
	run := &taugridv1.TauRun{}
	if r.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: name}, run, client.UnsafeDisableDeepCopy) != nil {
		return 0, 0
	}
	n := len(run.Status.Attempts)
	if n == 0 || run.Status.Attempts[n-1].Workload != owner.Name {
		return 0, 0 // another run's job of a like name, or an older attempt's
	}
	return runs.ReportedProgress(run, start)
}

// deadline is the activeDeadlineSeconds of a workload's Job or RayJob, and
// when it started (nil: not yet), read from the cache.
func (r *RunReconciler) deadline(ctx context.Context, w *kueue.Workload) (time.Duration, *metav1.Time, bool) {
	owner := metav1.GetControllerOfNoCopy(w)
	if owner == nil {
		return 0, nil, false
	}
	return runs.TimeLimit(ctx, r.Client, w.Namespace, owner.Kind, owner.Name, client.UnsafeDisableDeepCopy)
}
