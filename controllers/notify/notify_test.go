package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/controlplane"
)

const hmacKey = "s3cret-hmac-key-of-team-a"

// receiver is a team's webhook endpoint: it records each delivery and
// answers the first tries of each with fail (a 500) when asked to.
type receiver struct {
	mu        sync.Mutex
	got       []delivery
	failFirst int
	tries     map[string]int
}

type delivery struct {
	path, id, event, signature string
	body                       []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	id := r.Header.Get(HeaderDelivery)
	rc.tries[id]++
	if rc.tries[id] <= rc.failFirst {
		http.Error(w, "busy", http.StatusInternalServerError)
		return
	}
	rc.got = append(rc.got, delivery{path: r.URL.Path, id: id, event: r.Header.Get(HeaderEvent), signature: r.Header.Get(HeaderSignature), body: body})
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

type world struct {
	c    client.Client
	clk  *clocktesting.FakeClock
	recv *receiver
	url  string
	now  time.Time
}

func newWorld(t *testing.T, failFirst int) *world {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real API server; run without -short")
	}
	env := controlplane.ForTest(t, controlplane.Options{CRDDirectoryPaths: []string{"../../api/crds"}})
	s := controlplane.NewScheme()
	if err := taugridv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	rc := &receiver{failFirst: failFirst, tries: map[string]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	w := &world{c: c, clk: clocktesting.NewFakeClock(now), recv: rc, url: srv.URL, now: now}
	w.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	w.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "team-a"},
		Data: map[string][]byte{taugridv1.NotifyURLKey: []byte(srv.URL + "/hook?token=url-secret"), taugridv1.NotifyHMACKey: []byte(hmacKey)}})
	w.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "team-a"},
		Data: map[string][]byte{taugridv1.NotifyURLKey: []byte(srv.URL + "/services/T000/B000/url-secret")}})
	return w
}

func (w *world) create(t *testing.T, o client.Object) {
	t.Helper()
	if err := w.c.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

func (w *world) repository(t *testing.T, targets ...taugridv1.NotificationTarget) {
	t.Helper()
	repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: "research", Namespace: "team-a"},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: "https://git.example/team-a/research.git"}, Notifications: targets}}
	w.create(t, repo)
}

// run creates a run in phase, entered ago, with attempts.
func (w *world) run(t *testing.T, name string, phase taugridv1.RunPhase, ago time.Duration, attempts ...taugridv1.Attempt) {
	t.Helper()
	r := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: strings.Repeat("a", 40), Target: "train",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: taugridv1.RunRefPrefix + name, Requester: "alice@example.com"}}}
	w.create(t, r)
	r.Status = taugridv1.TauRunStatus{Phase: phase, Message: "exited 1: CUDA out of memory", Attempts: attempts,
		EvidenceURL: "https://tau.example/runs/team-a/" + name,
		Phases: []taugridv1.PhaseTransition{{Phase: taugridv1.PhasePending, Time: metav1.NewTime(w.now.Add(-ago - time.Hour))},
			{Phase: phase, Time: metav1.NewTime(w.now.Add(-ago))}}}
	if err := w.c.Status().Update(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// settle reconciles run until it asks for nothing more, stepping the
// clock to each requeue as the manager would wait for it.
func (w *world) settle(t *testing.T, r *Reconciler, name string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}})
		if err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		if res.RequeueAfter == 0 {
			return
		}
		w.clk.Step(res.RequeueAfter)
	}
	t.Fatal("the reconciler still asks to be called after 20 rounds")
}

func (w *world) reconciler() *Reconciler {
	return &Reconciler{Client: w.c, APIReader: w.c, Clock: w.clk, Sender: &Sender{AllowPrivate: true}}
}

func (w *world) records(t *testing.T, name string) map[string]taugridv1.NotificationRecord {
	t.Helper()
	var r taugridv1.TauRun
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: name}, &r); err != nil {
		t.Fatal(err)
	}
	out := map[string]taugridv1.NotificationRecord{}
	for _, n := range r.Status.Notifications {
		out[n.Key] = n
	}
	return out
}

// A failed, once preempted run: the JSON target hears of its end, its
// failure and its preemption once each, signed, the first after a 500;
// the Slack target hears of the failure; a restarted controller and a
// reconcile from a stale copy of the run send nothing more.
func TestEachEventIsDeliveredOnceSignedAndRetriedAfterA500(t *testing.T) {
	w := newWorld(t, 1)
	w.repository(t,
		taugridv1.NotificationTarget{Name: "hooks", Format: "json", SecretRef: "hook",
			Events: []taugridv1.NotificationEvent{taugridv1.NotifyEnded, taugridv1.NotifyFailed, taugridv1.NotifyPreempted}},
		taugridv1.NotificationTarget{Name: "chat", Format: "slack", SecretRef: "chat", Events: []taugridv1.NotificationEvent{taugridv1.NotifyFailed}})
	start := metav1.NewTime(w.now.Add(-50 * time.Minute))
	end := metav1.NewTime(w.now.Add(-40 * time.Minute))
	w.run(t, "r-failed", taugridv1.PhaseFailed, time.Minute,
		taugridv1.Attempt{Number: 1, Workload: "w1", StartTime: &start, EndTime: &end, Preemption: &taugridv1.Preemption{Time: end, Message: "preempted by a run of higher priority"}},
		taugridv1.Attempt{Number: 2, Workload: "w2", StartTime: &end})

	w.settle(t, w.reconciler(), "r-failed")

	got := w.recv.deliveries()
	events := map[string]int{}
	for _, d := range got {
		events[d.path+" "+d.event]++
		if strings.Contains(string(d.body), hmacKey) || strings.Contains(string(d.body), "url-secret") {
			t.Errorf("a delivery carries a secret: %s", d.body)
		}
		if d.path == "/hook" {
			if d.signature != Sign([]byte(hmacKey), d.body) {
				t.Errorf("delivery %s: signature %q does not verify", d.id, d.signature)
			}
			var p Payload
			if err := json.Unmarshal(d.body, &p); err != nil || p.Run.ID != "r-failed" || p.Run.EvidenceURL == "" {
				t.Errorf("delivery %s: %v %+v", d.id, err, p)
			}
		} else if !strings.Contains(string(d.body), `"text":"Run r-failed of team-a/research failed: exited 1: CUDA out of memory <https://tau.example/runs/team-a/r-failed|evidence>"`) {
			t.Errorf("the Slack message: %s", d.body)
		}
	}
	want := map[string]int{"/hook ended": 1, "/hook failed": 1, "/hook preempted": 1, "/services/T000/B000/url-secret failed": 1}
	if len(events) != len(want) {
		t.Errorf("deliveries %v, want %v", events, want)
	}
	for k, n := range want {
		if events[k] != n {
			t.Errorf("%s delivered %d times, want %d (all: %v)", k, events[k], n, events)
		}
	}
	for id, n := range w.recv.tries {
		if n != 2 {
			t.Errorf("delivery %s was tried %d times, want 2 (a 500, then delivered)", id, n)
		}
	}
	recs := w.records(t, "r-failed")
	for _, k := range []string{"hooks/ended", "hooks/failed", "hooks/preempted/1", "chat/failed"} {
		if r := recs[k]; r.State != taugridv1.NotifyDelivered || r.Tries != 2 {
			t.Errorf("the run's record of %s: %+v, want Delivered after 2 tries", k, r)
		}
	}

	// A restarted controller, and one whose cache shows the run from
	// before any record: nothing is sent again.
	w.settle(t, w.reconciler(), "r-failed")
	stale := w.reconciler()
	var old taugridv1.TauRun
	_ = w.c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "r-failed"}, &old)
	old.Status.Notifications = nil
	old.ResourceVersion = "1"
	stale.Client = staleRun{Client: w.c, run: &old}
	if _, err := stale.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "r-failed"}}); err == nil {
		t.Error("a reconcile from a stale copy of the run wrote its record")
	}
	if n := len(w.recv.deliveries()); n != len(got) {
		t.Errorf("%d deliveries after a restart and a stale reconcile, want the same %d", n, len(got))
	}
}

// staleRun answers reads of the run with an old copy, as a lagging cache.
type staleRun struct {
	client.Client
	run *taugridv1.TauRun
}

func (s staleRun) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r, ok := obj.(*taugridv1.TauRun); ok && key.Name == s.run.Name {
		s.run.DeepCopyInto(r)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// A run that waits: "waiting" is sent once it has waited waitingAfter,
// not before.
func TestWaitingIsSentOnceTheRunHasWaitedLongEnough(t *testing.T) {
	w := newWorld(t, 0)
	w.repository(t, taugridv1.NotificationTarget{Name: "hooks", SecretRef: "hook",
		Events: []taugridv1.NotificationEvent{taugridv1.NotifyWaiting}, WaitingAfter: &metav1.Duration{Duration: 10 * time.Minute}})
	w.run(t, "r-queued", taugridv1.PhaseQueued, 4*time.Minute)
	r := w.reconciler()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "r-queued"}})
	if err != nil || res.RequeueAfter != 6*time.Minute || len(w.recv.deliveries()) != 0 {
		t.Fatalf("4 min into a 10 min wait: %v, requeue after %s, %d deliveries; want none, and a call in 6 min", err, res.RequeueAfter, len(w.recv.deliveries()))
	}
	w.clk.Step(res.RequeueAfter)
	w.settle(t, r, "r-queued")
	if d := w.recv.deliveries(); len(d) != 1 || d[0].event != "waiting" || !strings.Contains(string(d[0].body), "has been waiting in its queue since") {
		t.Errorf("after 10 min: %+v", d)
	}
}

// From the attacker's side: a tenant's target that resolves to the
// cluster's own network (here the loopback) is never posted to, and the
// repository's status says why without the URL. A target that refuses
// with a 4xx is given up at once.
func TestATargetOnAPrivateNetworkIsRefusedAndShownOnTheRepository(t *testing.T) {
	w := newWorld(t, 0)
	w.repository(t, taugridv1.NotificationTarget{Name: "hooks", SecretRef: "hook", Events: []taugridv1.NotificationEvent{taugridv1.NotifyEnded}})
	w.run(t, "r-done", taugridv1.PhaseSucceeded, time.Minute)
	// https://, as a real target's: the address is what is refused.
	w.setURL(t, strings.Replace(w.url, "http://", "https://", 1)+"/hook?token=url-secret")
	r := w.reconciler()
	r.Sender = &Sender{} // the default: no private networks
	w.settle(t, r, "r-done")
	if n := len(w.recv.tries); n != 0 {
		t.Fatalf("the controller posted to a private address %d times", n)
	}
	if rec := w.records(t, "r-done")["hooks/ended"]; rec.State != taugridv1.NotifyGivenUp || !strings.Contains(rec.Message, "private network") {
		t.Errorf("the run's record: %+v", rec)
	}
	var repo taugridv1.TauRepository
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "research"}, &repo); err != nil {
		t.Fatal(err)
	}
	if len(repo.Status.Notifications) != 1 || !repo.Status.Notifications[0].Failing ||
		!strings.Contains(repo.Status.Notifications[0].Message, "private network") || strings.Contains(repo.Status.Notifications[0].Message, "url-secret") {
		t.Errorf("the repository's status: %+v", repo.Status.Notifications)
	}

	// A 404 is not retried.
	gone := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(gone.Close)
	w.setURL(t, gone.URL+"/gone")
	w.run(t, "r-done-2", taugridv1.PhaseSucceeded, time.Minute)
	w.settle(t, w.reconciler(), "r-done-2")
	if rec := w.records(t, "r-done-2")["hooks/ended"]; rec.State != taugridv1.NotifyGivenUp || rec.Tries != 1 || !strings.Contains(rec.Message, "404") {
		t.Errorf("a target answering 404: %+v, want given up after one try", rec)
	}

}

// setURL points the "hook" target's Secret at u.
func (w *world) setURL(t *testing.T, u string) {
	t.Helper()
	s := &corev1.Secret{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "hook"}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[taugridv1.NotifyURLKey] = []byte(u)
	if err := w.c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}
