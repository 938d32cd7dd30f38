package forgestatus

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var runR = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "r"}}

// A record in flight is a post whose outcome is unknown: the forge is read
// before anything is posted again.
func TestAPostInFlightIsSettledByReadingTheForge(t *testing.T) {
	inFlight := taugridv1.ForgeStatus{Context: "tau/default r", State: "pending", Description: "queued in runs",
		Phase: taugridv1.PhaseQueued, PostedAt: metav1.NewTime(sharedtest.Now.Add(-5 * time.Minute)), InFlight: true}
	settled := inFlight
	settled.InFlight, settled.PostedAt = false, metav1.NewTime(sharedtest.Now)
	cases := map[string]struct {
		shown   bool // the forge took the post in flight
		fail    *forgetest.Failure
		wantErr string
		posted  []string
		record  taugridv1.ForgeStatus
	}{
		"the forge shows it: confirmed, not posted again": {
			shown: true, posted: []string{"201 pending tau/default r: queued in runs"}, record: settled},
		"the forge never got it: posted": {
			posted: []string{"201 pending tau/default r: queued in runs"}, record: settled},
		"the forge cannot be read: the error returned, nothing posted": {
			fail:    &forgetest.Failure{Code: http.StatusServiceUnavailable, Body: "maintenance"},
			wantErr: "posting pending status: gitea: HTTP 503: maintenance", record: inFlight},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			run := queuedRun("").ForgeRecord(inFlight).Obj()
			w := newForgeWorld(t, nil, func(api string) []client.Object { return []client.Object{forgeRepo(api, "forge").Obj(), run} })
			if tc.shown {
				postDirectly(t, w, run)
			}
			if tc.fail != nil {
				w.srv.FailNext(1, *tc.fail)
			}
			r := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters}
			_, err := r.Reconcile(context.Background(), runR)
			if got := errText(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if w.srv.Reads() != 1 {
				t.Errorf("the forge was read %d times, want once", w.srv.Reads())
			}
			if d := cmp.Diff(tc.posted, w.posted()); d != "" {
				t.Errorf("posted (-want +got):\n%s", d)
			}
			if d := cmp.Diff(&tc.record, w.run(t, "r").Status.Forge); d != "" {
				t.Errorf("status.forge (-want +got):\n%s", d)
			}
		})
	}
}

// postDirectly posts run's desired status to the world's forge, as a
// reconcile that stopped before recording it did.
func postDirectly(t *testing.T, w *forgeWorld, run *taugridv1.TauRun) {
	t.Helper()
	p, err := forge.New(forge.Config{Type: forge.Gitea, APIURL: w.srv.URL, Token: forgeToken})
	if err != nil {
		t.Fatal(err)
	}
	s := forge.Desired(run)
	s.Owner, s.Repo = "team-a", "research"
	if _, err := p.Post(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// The cache lags behind the API server: a reconcile reading a copy of the
// run older than its record posts nothing. The reconciler that wrote the
// record knows the copy for one its write replaced, and looks again
// shortly without a request; one that does not (after a restart) fails to
// write its record over it, and the run's watch event brings a fresh
// reconcile.
func TestAStaleCopyOfTheRunPostsNothing(t *testing.T) {
	var stale *taugridv1.TauRun
	faults := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if run, ok := obj.(*taugridv1.TauRun); ok && stale != nil {
			stale.DeepCopyInto(run)
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	w := newForgeWorld(t, faults, func(api string) []client.Object {
		return []client.Object{forgeRepo(api, "forge").Obj(), queuedRun("").Obj()}
	})
	before := w.run(t, "r")
	r := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters}
	if _, err := r.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	stale = before
	got, err := r.Reconcile(context.Background(), runR)
	if err != nil || got != (reconcile.Result{RequeueAfter: shared.WokenByTheWrite}) {
		t.Errorf("from the copy its own write replaced: %+v, %v; want to wait for the write's watch event, looking again by itself only after %s", got, err, shared.WokenByTheWrite)
	}
	restarted := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters}
	got, err = restarted.Reconcile(context.Background(), runR)
	if err != nil || got != (reconcile.Result{}) {
		t.Errorf("from a stale copy, after a restart: %+v, %v; want nothing to do", got, err)
	}
	if d := cmp.Diff([]string{"201 pending tau/default r: queued in runs"}, w.posted()); d != "" {
		t.Errorf("posted (-want +got):\n%s", d)
	}
}

// A refused token drops the cached Secret: the fixed token is read at the
// next try, not a CredentialTTL later.
func TestAFixedTokenIsReadAgainAfterARefusal(t *testing.T) {
	w := newForgeWorld(t, nil, func(api string) []client.Object {
		return []client.Object{forgeRepo(api, "wrong").Obj(), queuedRun("").Obj(),
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong", Namespace: ns}, Data: map[string][]byte{gitsource.SecretToken: []byte("expired-token")}}}
	})
	r := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters}
	if got, err := r.Reconcile(context.Background(), runR); err != nil || got.RequeueAfter != ForgeSettingsRetry {
		t.Fatalf("with an expired token: %+v, %v; want a retry after %s", got, err, ForgeSettingsRetry)
	}
	secret := &corev1.Secret{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "wrong"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[gitsource.SecretToken] = []byte(forgeToken)
	if err := w.c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	want := []string{"401 pending tau/default r: queued in runs", "201 pending tau/default r: queued in runs"}
	if d := cmp.Diff(want, w.posted()); d != "" {
		t.Errorf("posted (-want +got):\n%s", d)
	}
}

// The cache still shows a post in flight that its reconcile has since
// confirmed: the API server's copy decides, and the forge is neither read
// nor posted to, nor a token of its pace spent (hack/scale: such settles
// set aside tokens nobody claimed).
func TestACachedPostInFlightAlreadyConfirmedCostsTheForgeNothing(t *testing.T) {
	confirmed := taugridv1.ForgeStatus{Context: "tau/default r", State: "pending", Description: "queued in runs",
		Phase: taugridv1.PhaseQueued, PostedAt: metav1.NewTime(sharedtest.Now.Add(-5 * time.Second))}
	cachedRecord := confirmed
	cachedRecord.InFlight = true
	cached := queuedRun("").ForgeRecord(cachedRecord).Obj()
	faults := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if run, ok := obj.(*taugridv1.TauRun); ok {
			cached.DeepCopyInto(run)
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	w := newForgeWorld(t, faults, func(api string) []client.Object {
		return []client.Object{forgeRepo(api, "forge").Obj(), queuedRun("").ForgeRecord(confirmed).Obj()}
	})
	apiServer := sharedtest.Builder(queuedRun("").ForgeRecord(confirmed).Obj()).Build()
	r := &ForgeReconciler{Client: w.c, APIReader: apiServer, Clock: w.clock, Recorder: w.events, Posters: w.posters}
	got, err := r.Reconcile(context.Background(), runR)
	if err != nil || got != (reconcile.Result{}) {
		t.Errorf("Reconcile = %+v, %v; want nothing to do", got, err)
	}
	if w.srv.Reads() != 0 || len(w.posted()) != 0 {
		t.Errorf("the forge was read %d times and posted %v; want neither", w.srv.Reads(), w.posted())
	}
}

// TestThePostsRecordIsWrittenThoughTheRunChangedDuringThePost: another
// controller of the process writes the run while the post is on its way
// to the forge. What the forge took is still recorded: that write is of
// status.forge alone, which only this reconciler writes, so it needs no
// current copy (a record left in flight would have the next look read the
// forge and spend its budget). The other controller's write stays.
func TestThePostsRecordIsWrittenThoughTheRunChangedDuringThePost(t *testing.T) {
	w := newForgeWorld(t, nil, func(api string) []client.Object {
		return []client.Object{forgeRepo(api, "forge").Obj(), queuedRun("").Obj()}
	})
	written := &shared.Written{}
	changed := false
	w.posters.HTTPClient = &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPost && !changed {
			changed = true // the run reconciler writes the run as the post goes out
			run := w.run(t, "r")
			replaced := run.ResourceVersion
			run.Status.Message = "admitted to runs"
			if err := w.c.Status().Update(req.Context(), run); err != nil {
				return nil, err
			}
			written.Note(run, replaced, w.clock.Now())
		}
		return http.DefaultTransport.RoundTrip(req)
	})}
	r := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters, Written: written}
	if _, err := r.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Fatal("the run was not changed during the post")
	}
	got := w.run(t, "r")
	if f := got.Status.Forge; f == nil || f.InFlight || f.Description != "queued in runs" {
		t.Errorf("the post's record: %+v; want what the forge took, not in flight", f)
	}
	if got.Status.Message != "admitted to runs" {
		t.Errorf("the other controller's write was undone: message %q", got.Status.Message)
	}
	if d := cmp.Diff([]string{"201 pending tau/default r: queued in runs"}, w.posted()); d != "" {
		t.Errorf("posted (-want +got):\n%s", d)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
