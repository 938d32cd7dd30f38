package run

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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

// observed wakes runs through h at PriorityObserved. The initial list and
// resyncs keep controller-runtime's low priority.
func observed(h handler.EventHandler) handler.EventHandler {
	return prioritized{h: h}
}

type prioritized struct{ h handler.EventHandler }

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
func (prioritized) queue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return atPriority{pq}
}

// atPriority adds at PriorityObserved whatever is added without a
// priority; an add that names one (controller-runtime's low priority for
// the initial list and resyncs) keeps it.
type atPriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
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
		ready := q.Len
		r.readyRuns.Store(&ready)
		return q
	}
}
