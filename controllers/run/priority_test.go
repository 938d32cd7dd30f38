package run

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
)

// A pod event wakes its run ahead of the new runs already waiting for
// their first reconcile; the initial list keeps controller-runtime's low
// priority.
func TestWhatTheClusterShowsOfARunWakesItAheadOfNewRuns(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("observed-first")
	defer q.ShutDown()
	newRun := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}}
	}
	for _, name := range []string{"new-1", "new-2", "new-3"} {
		q.Add(newRun(name)) // the For handler's create events: priority 0
	}
	pod := func(run string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: run + "-0-abcde", ResourceVersion: "7",
			Labels: map[string]string{render.LabelRun: run}}}
	}
	h := observed(handler.EnqueueRequestsFromMapFunc(podToRun), nil)
	h.Create(t.Context(), event.CreateEvent{Object: pod("admitted")}, q)
	h.Create(t.Context(), event.CreateEvent{Object: pod("listed"), IsInInitialList: true}, q)

	want := []struct {
		name     string
		priority int
	}{{"admitted", PriorityObserved}, {"new-1", 0}, {"new-2", 0}, {"new-3", 0}, {"listed", handler.LowPriority}}
	for _, w := range want {
		item, priority, _ := q.GetWithPriority()
		if item.Name != w.name || priority != w.priority {
			t.Fatalf("next %s at priority %d, want %s at %d", item.Name, priority, w.name, w.priority)
		}
		q.Done(item)
	}
}

// A run's own timers (a resync, a detail held back, a deadline) bring it
// back below what the cluster shows of a run and above the new runs; a
// requeue that follows up the change just handled (under a second) or a
// retry after an error keeps the priority of the event that woke it.
func TestARunsTimerComesBackBelowWhatTheClusterShowsAndAboveNewRuns(t *testing.T) {
	for _, tc := range []struct {
		res  reconcile.Result
		err  error
		want *int
	}{
		{res: reconcile.Result{RequeueAfter: progressResync}, want: ptr.To(PriorityTimer)},
		{res: reconcile.Result{RequeueAfter: timerAfter}, want: ptr.To(PriorityTimer)},
		{res: reconcile.Result{RequeueAfter: shared.CacheLag}},
		{res: reconcile.Result{RequeueAfter: recordSettle}},
		{res: reconcile.Result{}},
		{res: reconcile.Result{RequeueAfter: time.Minute}, err: errors.New("the API server is away")},
		{res: reconcile.Result{RequeueAfter: time.Minute, Priority: ptr.To(PriorityObserved)}, want: ptr.To(PriorityObserved)},
	} {
		if got := timed(tc.res, tc.err).Priority; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("requeue after %s (error %v, priority %v): priority %v, want %v", tc.res.RequeueAfter, tc.err, tc.res.Priority, got, tc.want)
		}
	}

	// In the reconciler: an admitted run's resync is a timer.
	w := newRunWorld(t, nil, submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns).Unsuspended()), workloadOf(true))
	res, err := w.r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter < timerAfter || res.Priority == nil || *res.Priority != PriorityTimer {
		t.Errorf("the admitted run comes back after %s at priority %v, want a timer at %d", res.RequeueAfter, res.Priority, PriorityTimer)
	}

	// In the queue: the cluster's news first, then timers, then new runs.
	q := priorityqueue.New[reconcile.Request]("timers")
	defer q.ShutDown()
	add := func(name string, priority int) {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priority)}, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	}
	add("new", 0)
	add("resynced", PriorityTimer)
	add("admitted", PriorityObserved)
	for _, want := range []string{"admitted", "resynced", "new"} {
		item, _, _ := q.GetWithPriority()
		if item.Name != want {
			t.Fatalf("next %s, want %s", item.Name, want)
		}
		q.Done(item)
	}
}

// A change to a run already there (a cancellation, a resume request, its
// evidence sealed) wakes it ahead of the new runs waiting for their first
// reconcile; its other status writes do not wake it at all.
func TestAChangeToARunAlreadyThereWakesItAheadOfNewRuns(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("changes-first")
	defer q.ShutDown()
	for _, name := range []string{"new-1", "new-2"} {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	}
	h, changes := observed(&handler.EnqueueRequestForObject{}, nil), runChanges()
	update := func(old, cur *taugridv1.TauRun) {
		e := event.UpdateEvent{ObjectOld: old, ObjectNew: cur}
		if changes.Update(e) {
			h.Update(t.Context(), e, q)
		}
	}
	base := builders.MakeTauRun("cancelled", ns).Phase(taugridv1.PhaseQueued, "").Obj()
	base.Generation, base.ResourceVersion = 1, "10"
	cancelled := base.DeepCopy()
	cancelled.Spec.Cancel, cancelled.Generation, cancelled.ResourceVersion = true, 2, "11"
	update(base, cancelled)

	resumed := builders.MakeTauRun("resumed", ns).Phase(taugridv1.PhaseFailed, "").Obj()
	resumed.ResourceVersion = "20"
	asked := resumed.DeepCopy()
	asked.Annotations, asked.ResourceVersion = map[string]string{taugridv1.AnnotationResume: "1"}, "21"
	update(resumed, asked)

	written := builders.MakeTauRun("written", ns).Phase(taugridv1.PhaseQueued, "").Obj()
	written.ResourceVersion = "30"
	moved := written.DeepCopy()
	moved.Status.Message, moved.ResourceVersion = "queued #1 of 2", "31"
	update(written, moved)
	if changes.Create(event.CreateEvent{Object: written}) {
		t.Error("a new run passed runChanges: it is the For watch's, at priority 0")
	}

	want := []struct {
		name     string
		priority int
	}{{"cancelled", PriorityObserved}, {"resumed", PriorityObserved}, {"new-1", 0}, {"new-2", 0}}
	for _, w := range want {
		item, priority, _ := q.GetWithPriority()
		if item.Name != w.name || priority != w.priority {
			t.Fatalf("next %s at priority %d, want %s at %d", item.Name, priority, w.name, w.priority)
		}
		q.Done(item)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("%d more runs woken; a status write should wake none", n)
	}
}
