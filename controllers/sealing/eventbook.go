package sealing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/taugrid/taugrid/evidence"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// EventBook keeps, from one watch of the cluster's events, what a bundle
// records of those about the kinds a run's attempt is made of (the run,
// its Job or RayJob and Ray cluster, Kueue's Workload, the pods), indexed
// by the object they are about. A seal reads its events here and sends no
// request: kube-apiserver keeps no watch cache of events, so every list
// of a namespace's events, field-selected or not, reads all of them from
// etcd (hack/scale: at 10,000 runs the sealer's workers waited on those
// lists, four a seal, each reading thousands of events).
//
// The book holds each event's type, reason, object, message, count and
// time, not the Event, and forgets an event when the API server deletes
// it (--event-ttl, an hour by default). A watch lags its writes by the API
// server's floor (hack/scale's probe: about half a second under load), so
// an event posted in that moment before a seal may be missing from the
// bundle, as an event still queued in its poster's broadcaster always
// could be.
type EventBook struct {
	// ListerWatcher lists and watches the cluster's events.
	ListerWatcher cache.ListerWatcher

	mu sync.RWMutex
	// about holds the events by the object they are about.
	about map[bookObject][]bookEvent
	// of says, by the event's namespace/name, what it is about.
	of     map[string]bookObject
	synced atomic.Bool
}

// NewEventBook is a book of the cluster's events, watched in protobuf
// (events are the API server's busiest writes, and the watch sees every
// one).
func NewEventBook(cfg *rest.Config) (*EventBook, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &EventBook{ListerWatcher: EventsOf(cs)}, nil
}

// EventsOf lists and watches the clientset's events, in every namespace.
func EventsOf(cs kubernetes.Interface) cache.ListerWatcher {
	events := cs.CoreV1().Events(metav1.NamespaceAll)
	return listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return events.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return events.Watch(ctx, o)
		},
	}}
}

// listThenWatch has the reflector list the events, then watch them: the API
// server streams a watch's initial events (client-go's watch-list) from its
// watch cache, which events do not have.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// bookObject is an object events are about.
type bookObject struct{ namespace, name string }

// bookEvent is what the book keeps of one event: its name and what a
// bundle records of it, its type and reason interned (a few values,
// repeated across every event).
type bookEvent struct {
	name string // the Event's
	rec  evidence.EventRecord
}

// bookKinds are the kinds of object a run's attempt is made of: events
// about anything else are not kept.
var bookKinds = map[string]bool{"TauRun": true, "Job": true, "Pod": true, "Workload": true, "RayJob": true, "RayCluster": true}

// Start watches the cluster's events until ctx ends. A watch that breaks is
// resumed, or the events listed again, by client-go's reflector.
func (b *EventBook) Start(ctx context.Context) error {
	r := cache.NewReflectorWithOptions(b.ListerWatcher, &corev1.Event{}, bookStore{b}, cache.ReflectorOptions{Name: "evidence-events"})
	r.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection: the book feeds the sealer, which runs on the leader.
func (b *EventBook) NeedLeaderElection() bool { return true }

// Synced reports whether the book holds the cluster's events: it has
// listed them once.
func (b *EventBook) Synced() bool { return b != nil && b.synced.Load() }

// About is what the book holds of the events about the named objects of
// namespace ns (any kind of bookKinds), in the order of the events' names,
// as the API server lists them: an event's name is its object's and the
// time it was first posted, so those about one object are in the order
// they were posted.
func (b *EventBook) About(ns string, names map[string]bool) []evidence.EventRecord {
	b.mu.RLock()
	var evs []bookEvent
	for name := range names {
		evs = append(evs, b.about[bookObject{ns, name}]...)
	}
	b.mu.RUnlock()
	slices.SortFunc(evs, func(x, y bookEvent) int { return strings.Compare(x.name, y.name) })
	out := make([]evidence.EventRecord, len(evs))
	for i, e := range evs {
		out[i] = e.rec
	}
	return out
}

// Forget drops what the book holds of the events about the named objects
// of namespace ns: a sealed attempt's Job, Workload and pods, which no
// bundle reads again (at 10,000 runs in an hour, the events of every
// ended run were the book's bulk, hack/scale). An event about them posted
// or changed later is held again until the API server deletes it. A nil
// book holds nothing.
func (b *EventBook) Forget(ns string, names map[string]bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for name := range names {
		o := bookObject{ns, name}
		for _, e := range b.about[o] {
			delete(b.of, ns+"/"+e.name)
		}
		delete(b.about, o)
	}
}

// put adds or replaces an event; the caller holds mu.
func (b *EventBook) put(ev *corev1.Event) {
	key := ev.Namespace + "/" + ev.Name
	b.drop(key)
	if !bookKinds[ev.InvolvedObject.Kind] {
		return
	}
	o := bookObject{ev.Namespace, ev.InvolvedObject.Name}
	b.of[key] = o
	rec := eventRecord(ev)
	rec.Type, rec.Reason = unique.Make(rec.Type).Value(), unique.Make(rec.Reason).Value()
	b.about[o] = append(b.about[o], bookEvent{name: ev.Name, rec: rec})
}

// drop forgets the event of key (namespace/name); the caller holds mu.
func (b *EventBook) drop(key string) {
	o, ok := b.of[key]
	if !ok {
		return
	}
	delete(b.of, key)
	name := key[len(o.namespace)+1:]
	evs := slices.DeleteFunc(b.about[o], func(e bookEvent) bool { return e.name == name })
	if len(evs) == 0 {
		delete(b.about, o)
		return
	}
	b.about[o] = evs
}

// bookStore is the book as the reflector's store.
type bookStore struct{ b *EventBook }

func (s bookStore) Add(obj any) error    { return s.Update(obj) }
func (s bookStore) Resync() error        { return nil }
func (s bookStore) Update(obj any) error { return s.apply(obj, false) }
func (s bookStore) Delete(obj any) error { return s.apply(obj, true) }

func (s bookStore) apply(obj any, deleted bool) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return fmt.Errorf("the events watch gave a %T", obj)
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.makeMaps()
	if deleted {
		s.b.drop(ev.Namespace + "/" + ev.Name)
		return nil
	}
	s.b.put(ev)
	return nil
}

// Replace holds the listed events instead of what the book held.
func (s bookStore) Replace(objs []any, _ string) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.about, s.b.of = nil, nil
	s.b.makeMaps()
	for _, obj := range objs {
		if ev, ok := obj.(*corev1.Event); ok {
			s.b.put(ev)
		}
	}
	s.b.synced.Store(true)
	return nil
}

// makeMaps makes the book's maps if it has none; the caller holds mu.
func (b *EventBook) makeMaps() {
	if b.about == nil {
		b.about, b.of = map[bookObject][]bookEvent{}, map[string]bookObject{}
	}
}
