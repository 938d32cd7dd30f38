package run

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/render"
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
	h := observed(handler.EnqueueRequestsFromMapFunc(podToRun))
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
