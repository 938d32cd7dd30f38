package sealing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// watchStarted tells when the reflector has started its watch, so that
// what the test posts after is seen by the watch, not missed between a
// list and the watch as a fake clientset would (a real API server resumes
// the watch from the list's resourceVersion).
type watchStarted struct {
	cache.ListerWatcher
	started chan struct{}
}

func (w watchStarted) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return cache.ToListerWatcherWithContext(w.ListerWatcher).ListWithContext(ctx, o)
}

func (w watchStarted) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	wi, err := cache.ToListerWatcherWithContext(w.ListerWatcher).WatchWithContext(ctx, o)
	select {
	case w.started <- struct{}{}:
	default:
	}
	return wi, err
}

// IsWatchListSemanticsUnSupported is the wrapped one's: the fake clientset
// does not stream a watch's initial events.
func (w watchStarted) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(w.ListerWatcher)
}

// bookAbout is what the book holds about the run's objects, as
// "Kind/name Reason: message (count)".
func bookAbout(b *EventBook) []string {
	var out []string
	for _, r := range b.About(ns, map[string]bool{"r": true, "r-1": true, "r-1-xyz12": true, "job-r-1-abcde": true}) {
		out = append(out, fmt.Sprintf("%s %s: %s (%d)", r.Object, r.Reason, r.Message, r.Count))
	}
	return out
}

// The book, fed by client-go's reflector, holds the events about what a
// run's attempt is made of, in the order they were named, and follows the
// watch: a new event, a count raised, an event deleted.
func TestTheEventBookFollowsTheWatchOfEvents(t *testing.T) {
	cs := fake.NewClientset(
		builders.MakeEventAbout("r-1-xyz12.2", ns, "Pod", "r-1-xyz12", "Normal", "Started", "started container main", started.Add(time.Second)),
		builders.MakeEventAbout("r-1-xyz12.1", ns, "Pod", "r-1-xyz12", "Normal", "Scheduled", "assigned to gpu-1", started),
		builders.MakeEventAbout("job-r-1-abcde.1", ns, "Workload", "job-r-1-abcde", "Normal", "Admitted", "admitted by gpu", started),
		// Not kept: another kind, even of the run's name; another namespace.
		builders.MakeEventAbout("r.1", ns, "Service", "r", "Normal", "Created", "a Service named as the run", started),
		builders.MakeEventAbout("r-1.1", "team-b", "Job", "r-1", "Normal", "Completed", "another team's", started),
		builders.MakeEventAbout("gpu-1.1", ns, "Node", "gpu-1", "Warning", "Rebooted", "a node", started))
	watching := make(chan struct{}, 1)
	b := &EventBook{ListerWatcher: watchStarted{EventsOf(cs), watching}}
	if b.Synced() {
		t.Fatal("the book says it is synced before it listed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.Start(ctx) }()
	// The reflector lists, then watches; or, where the API server streams
	// a watch's initial events, watches and takes them as its list.
	select {
	case <-watching:
	case <-time.After(30 * time.Second):
		t.Fatal("the book never watched")
	}
	for deadline := time.Now().Add(30 * time.Second); !b.Synced(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the book watches but never listed")
		}
	}
	want := []string{"Workload/job-r-1-abcde Admitted: admitted by gpu (1)",
		"Pod/r-1-xyz12 Scheduled: assigned to gpu-1 (1)", "Pod/r-1-xyz12 Started: started container main (1)"}
	if d := cmp.Diff(want, bookAbout(b)); d != "" {
		t.Fatalf("listed (-want +got):\n%s", d)
	}

	events := cs.CoreV1().Events(ns)
	completed := builders.MakeEventAbout("r-1.1", ns, "Job", "r-1", "Normal", "Completed", "Job completed", ended)
	if _, err := events.Create(ctx, completed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	backoff := builders.MakeEventAbout("r-1-xyz12.1", ns, "Pod", "r-1-xyz12", "Normal", "Scheduled", "assigned to gpu-1", started)
	backoff.Count = 3
	if _, err := events.Update(ctx, backoff, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := events.Delete(ctx, "job-r-1-abcde.1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = []string{"Pod/r-1-xyz12 Scheduled: assigned to gpu-1 (3)", "Pod/r-1-xyz12 Started: started container main (1)",
		"Job/r-1 Completed: Job completed (1)"} // r-1-xyz12.1 is before r-1.1
	deadline := time.Now().Add(30 * time.Second)
	for d := cmp.Diff(want, bookAbout(b)); d != ""; d = cmp.Diff(want, bookAbout(b)) {
		if time.Now().After(deadline) {
			t.Fatalf("after a create, an update and a delete (-want +got):\n%s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A record from the book is what a list's event gives the bundle: its
// time (the latest of the event's), type, reason, object, message and
// count.
func TestTheEventBookKeepsWhatABundleRecords(t *testing.T) {
	ev := builders.MakeEventAbout("r.1", ns, "TauRun", "r", "Warning", "Retrying", "attempt 2: the node was lost", ended)
	ev.FirstTimestamp = metav1.NewTime(started)
	b := &EventBook{}
	if err := (bookStore{b}).Replace([]any{ev}, "1"); err != nil {
		t.Fatal(err)
	}
	want := []evidence.EventRecord{{Time: eventTime(ev), Type: "Warning", Reason: "Retrying", Object: "TauRun/r",
		Message: "attempt 2: the node was lost", Count: 1}}
	if d := cmp.Diff(want, b.About(ns, map[string]bool{"r": true})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if err := (bookStore{b}).Delete(cache.DeletedFinalStateUnknown{Key: ns + "/r.1", Obj: ev}); err != nil {
		t.Fatal(err)
	}
	if got := b.About(ns, map[string]bool{"r": true}); len(got) != 0 {
		t.Errorf("after the event was deleted while the watch was down: %+v", got)
	}
	if err := (bookStore{b}).Add(&corev1.Pod{}); err == nil {
		t.Error("a pod from the events watch was taken without an error")
	}
}
