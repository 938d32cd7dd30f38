package run

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// PriorityObserved is the work queue priority of a run woken by what the
// cluster shows of it (its Workload, Job, RayJob or pods), above a new
// run's first reconcile (0). A run's phase follows Kueue and the pods
// within a second even while thousands of new runs wait to be submitted:
// hack/scale, 10,000 runs requested in 4 minutes, an admitted run's
// Workload event waited behind them in the one queue, and its TauRun said
// Admitted up to 112 s after Kueue did.
const PriorityObserved = 10

// PriorityTimer is the work queue priority of a run looked at again when a
// wait of its own is up: the resync of a run that holds quota, a detail
// held back, its next GPU reading, a deadline, a retry. It is below what
// the cluster shows of a run (PriorityObserved) and above a new run's
// first reconcile, so no timer waits behind the runs not yet submitted.
// hack/scale, 10,000 runs: while thousands of runs were Admitted or
// Running (1,854 and 3,043 at one report), each resynced every 30 s at
// the priority of the event that had last woken it, TauRuns said Admitted
// 9.9 s after Kueue did at p99 (12.3 s at worst); with timers below the
// cluster's news, 4.1-4.9 s (docs/benchmarks.md, FF and GG).
const PriorityTimer = 5

// timed gives a requeue that is a timer (timerAfter or longer, no error)
// PriorityTimer. A shorter one follows up the change the reconcile
// handled (the cache catching up with the write just made, a record
// settling, a conflict) and keeps the priority of the event that woke the
// run, as does a retry after an error.
func timed(res reconcile.Result, err error) reconcile.Result {
	if err == nil && res.RequeueAfter >= timerAfter && res.Priority == nil {
		res.Priority = ptr.To(PriorityTimer)
	}
	return res
}

// timerAfter: a requeue this far off or more is a timer (timed).
const timerAfter = time.Second

// runChanges passes the changes to a run already there that the run
// reconciler acts on, woken at PriorityObserved as the cluster's news of
// a run: its spec (a cancellation), its annotations (a resume request)
// and its evidence sealed. The run's other status writes would only wake
// it for nothing. Before, they came at priority 0, behind every new run
// not yet submitted: with 10,000 runs requested in 4 minutes (hack/scale,
// GG) the median TauRun was made 212 s after its request and the median
// Job 748 s after it, about 9 minutes of waiting for a worker, and a
// cancellation would have waited as long.
func runChanges() predicate.Predicate {
	updates := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return predicate.And[client.Object](updates,
		predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, SealedNow()))
}

// observed wakes runs through h at PriorityObserved, and tells woke (if
// set) of each run it wakes. The initial list and resyncs keep
// controller-runtime's low priority.
func observed(h handler.EventHandler, woke func(types.NamespacedName)) handler.EventHandler {
	return prioritized{h: h, woke: woke}
}

type prioritized struct {
	h    handler.EventHandler
	woke func(types.NamespacedName)
}

func (p prioritized) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p.h.Create(ctx, e, p.queue(q))
}

func (p prioritized) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p.h.Update(ctx, e, p.queue(q))
}

func (p prioritized) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p.h.Delete(ctx, e, p.queue(q))
}

func (p prioritized) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p.h.Generic(ctx, e, p.queue(q))
}

// queue is q adding at PriorityObserved, when q is a priority queue (the
// default in controller-runtime); any other queue is used as it is.
func (p prioritized) queue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return atPriority{pq, p.woke}
}

// atPriority adds at PriorityObserved whatever is added without a
// priority; an add that names one (controller-runtime's low priority for
// the initial list and resyncs) keeps it.
type atPriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	woke func(types.NamespacedName) // told of each run added now; nil: none
}

func (q atPriority) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q atPriority) AddAfter(item reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

func (q atPriority) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func (q atPriority) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(PriorityObserved)
	}
	if q.woke != nil && o.After == 0 && !o.RateLimited {
		for _, it := range items {
			q.woke(it.NamespacedName)
		}
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// newQueue makes the controller's work queue as controller-runtime does
// by default (its priority queue, with the rate limiter and a logger named
// for the controller), and counts its ready runs for behind.
func (r *RunReconciler) newQueue(log logr.Logger) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = limiter
		})
		r.readyRuns = q.Len
		return q
	}
}
