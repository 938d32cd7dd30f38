package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/forgestatus"
)

const forgeToken = "tau-test-forge-token-9f8e7d"

// forgeFixture is a run fixture whose repository reports to a fake forge.
type forgeFixture struct {
	*runFixture
	srv   *forgetest.Server
	clock *clocktesting.FakeClock
	rec   *events.FakeRecorder
	r     *forgestatus.ForgeReconciler
}

func newForgeFixture(t testing.TB, prefix string, typ forge.Type, secretToken string) *forgeFixture {
	t.Helper()
	srv := forgetest.New(typ, forgeToken)
	t.Cleanup(srv.Close)
	return newForgeFixtureOn(t, prefix, srv, map[string][]byte{gitsource.SecretToken: []byte(secretToken)}, false)
}

// newForgeFixtureOn reports to srv with a Secret holding data.
func newForgeFixtureOn(t testing.TB, prefix string, srv *forgetest.Server, data map[string][]byte, checkRuns bool) *forgeFixture {
	t.Helper()
	typ := srv.Type
	f := &forgeFixture{runFixture: newRunFixture(t, prefix), srv: srv,
		clock: clocktesting.NewFakeClock(time.Now()), rec: events.NewFakeRecorder(100)}
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge", Namespace: f.ns}, Data: data}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	base := f.repo.DeepCopy()
	f.repo.Spec.Forge = &taugridv1.Forge{Type: taugridv1.ForgeType(typ), APIURL: f.srv.URL,
		SecretRef: taugridv1.LocalObjectReference{Name: "forge"}, CheckRuns: checkRuns}
	if err := k8s.Patch(ctx, f.repo, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.r = f.reconciler()
	return f
}

// reconciler is a fresh ForgeReconciler, as after a controller restart.
func (f *forgeFixture) reconciler() *forgestatus.ForgeReconciler {
	return &forgestatus.ForgeReconciler{Client: k8s, Clock: f.clock, Recorder: f.rec, Posters: &forge.Posters{Reader: k8s, Clock: f.clock}}
}

func (f *forgeFixture) reconcileForge(t testing.TB, name string) (reconcile.Result, error) {
	t.Helper()
	return f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: name}})
}

// mustReconcileForge reconciles and fails the test on an error.
func (f *forgeFixture) mustReconcileForge(t testing.TB, name string) reconcile.Result {
	t.Helper()
	res, err := f.reconcileForge(t, name)
	if err != nil {
		t.Fatalf("reconciling the forge status of %s: %v", name, err)
	}
	return res
}

// posted lists the accepted statuses as "state: description".
func (f *forgeFixture) posted() []string {
	var out []string
	for _, c := range f.srv.Accepted() {
		out = append(out, c.State+": "+c.Description)
	}
	return out
}

// noTokenIn fails the test if the token shows in events, the run's
// conditions or message, or the given errors.
func (f *forgeFixture) noTokenIn(t *testing.T, name string, errs ...error) {
	t.Helper()
	var texts []string
	for len(f.rec.Events) > 0 {
		texts = append(texts, <-f.rec.Events)
	}
	run := &taugridv1.TauRun{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, run); err != nil {
		t.Fatal(err)
	}
	texts = append(texts, run.Status.Message)
	for _, c := range run.Status.Conditions {
		texts = append(texts, c.Message)
	}
	for _, err := range errs {
		if err != nil {
			texts = append(texts, err.Error())
		}
	}
	for _, s := range texts {
		if strings.Contains(s, forgeToken) {
			t.Errorf("the forge token shows in %q", s)
		}
	}
}

func TestForgeStatusFollowsOneRunWithoutDuplicates(t *testing.T) {
	f := newForgeFixture(t, "fs1", forge.GitHub, forgeToken)
	f.research.tag("run/first")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/first")

	f.mustReconcileForge(t, run.Name)
	f.mustReconcileForge(t, run.Name) // nothing changed: nothing posted

	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	if res := f.mustReconcileForge(t, run.Name); res.RequeueAfter != 0 {
		t.Errorf("a new phase within a second of the last post waited %v, want it posted at once", res.RequeueAfter)
	}
	if n := len(f.srv.Calls()); n != 2 {
		t.Errorf("%d calls after the phase changed, want 2", n)
	}
	f.mustReconcileForge(t, run.Name)

	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))
	f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)
	if res := f.mustReconcileForge(t, run.Name); res.RequeueAfter != 0 {
		t.Errorf("the final status waited %v, want it posted at once", res.RequeueAfter)
	}
	f.mustReconcileForge(t, run.Name)
	f.r = f.reconciler() // a restart posts nothing again
	f.mustReconcileForge(t, run.Name)

	want := []string{"pending: accepted: preparing the run", "pending: admitted in runs: starting", "success: succeeded"}
	if diff := cmp.Diff(want, f.posted()); diff != "" {
		t.Errorf("posted statuses (-want +got):\n%s", diff)
	}
	if n := len(f.srv.Calls()); n != len(want) {
		t.Errorf("%d API calls, want %d", n, len(want))
	}
	owner, repo, _, err := forge.ParseRepoURL(f.research.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.srv.Calls() {
		if c.Context != "tau/default "+run.Name || c.Owner != owner || c.Repo != repo || c.SHA != run.Spec.Commit {
			t.Errorf("call = %+v, want context tau/default %s on %s/%s at %s", c, run.Name, owner, repo, run.Spec.Commit)
		}
	}
	f.noTokenIn(t, run.Name)
}

func TestAForgeOutageStillEndsWithTheFinalStatus(t *testing.T) {
	f := newForgeFixture(t, "fs2", forge.Gitea, "wrong-"+forgeToken)
	f.research.tag("run/outage")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/outage")

	// A refused token is a human's to fix: a Warning, and a slow retry.
	res, err := f.reconcileForge(t, run.Name)
	if err != nil || res.RequeueAfter != forgestatus.ForgeSettingsRetry {
		t.Errorf("with a refused token: %v, %v; want a requeue after %v", res, err, forgestatus.ForgeSettingsRetry)
	}
	if ev := <-f.rec.Events; !strings.Contains(ev, forgestatus.ReasonForgeRejected) || strings.Contains(ev, forgeToken) {
		t.Errorf("event %q, want %s without the token", ev, forgestatus.ReasonForgeRejected)
	}
	secret := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: "forge"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[gitsource.SecretToken] = []byte(forgeToken)
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	f.mustReconcileForge(t, run.Name)

	// The forge goes down while the run ends.
	f.srv.FailNext(4, forgetest.Failure{Code: 500, Body: "internal error"})
	f.srv.FailNext(1, forgetest.Failure{Code: 429, Header: map[string]string{"Retry-After": "30"}})
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))
	f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)
	var errs []error
	for i := range 4 {
		if _, err := f.reconcileForge(t, run.Name); err == nil {
			t.Fatalf("reconcile %d during the outage succeeded, want an error to back off on", i)
		} else {
			errs = append(errs, err)
		}
		f.r = f.reconciler() // restarts lose nothing: the status holds what was posted
	}
	if res := f.mustReconcileForge(t, run.Name); res.RequeueAfter != 30*time.Second {
		t.Errorf("rate limited: requeue after %v, want 30s", res.RequeueAfter)
	}
	f.clock.Step(30 * time.Second)
	f.mustReconcileForge(t, run.Name)
	f.mustReconcileForge(t, run.Name)

	want := []string{"pending: accepted: preparing the run", "success: succeeded"}
	if diff := cmp.Diff(want, f.posted()); diff != "" {
		t.Errorf("posted statuses (-want +got):\n%s", diff)
	}
	// Posts: 1 refused, 1 pending, 1 answered 500, 1 success. A post that
	// failed with a 500 may have been taken, so every later try first asks
	// the forge what the commit shows: 3 reads answered 500, 1 answered 429,
	// 1 that finds "accepted" still there.
	if n, reads := len(f.srv.Calls()), f.srv.Reads(); n != 4 || reads != 5 {
		t.Errorf("%d posts and %d reads, want 4 and 5", n, reads)
	}
	f.noTokenIn(t, run.Name, errs...)
}
