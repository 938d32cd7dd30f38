package repository

import (
	"context"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func gitError(kind error) error {
	return &gitsource.Error{Op: "list", URL: repoURL, Kind: kind}
}

// TestGitUnavailable: a poll that cannot reach git says so in Ready; a
// transient failure is retried with backoff and leaves the generation to
// do again, a terminal one waits for the next interval. What the last good
// poll recorded stays, and the next good poll clears the condition.
func TestGitUnavailable(t *testing.T) {
	cases := map[string]struct {
		polledBefore bool // a good poll came first
		err          error
		transient    bool
	}{
		"the host cannot be reached on the first poll":      {err: gitError(gitsource.ErrUnreachable), transient: true},
		"the server fails (5xx) on the first poll":          {err: gitError(gitsource.ErrServer), transient: true},
		"the credentials are refused on the first poll":     {err: gitError(gitsource.ErrAuth)},
		"the repository is gone":                            {err: gitError(gitsource.ErrNotFound)},
		"a later poll times out":                            {polledBefore: true, err: gitError(gitsource.ErrTimeout), transient: true},
		"a later poll finds the server's certificate wrong": {polledBefore: true, err: gitError(gitsource.ErrTLS)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepoWorld(t, nil, research().Obj())
			registered(w.git)
			w.git.refs["refs/tau/runs/x"] = at(c1)
			if tc.polledBefore {
				w.mustReconcile(t)
			}
			before := w.repo(t).Status
			w.git.err = tc.err
			res, err := w.reconcile(t)
			if tc.transient != (err != nil) {
				t.Fatalf("reconcile error = %v, want one: %v", err, tc.transient)
			}
			if !tc.transient && (res.RequeueAfter < time.Minute || res.RequeueAfter > 66*time.Second) {
				t.Errorf("requeue after %s, want the interval", res.RequeueAfter)
			}
			got := w.repo(t)
			if diff := cmp.Diff([]string{"Ready=False/GitUnavailable"}, conditions(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got, want := readyMessage(got), tc.err.Error(); got != want {
				t.Errorf("Ready says %q, want %q", got, want)
			}
			handled := !tc.transient || tc.polledBefore
			if o := got.Status.ObservedGeneration == got.Generation; o != handled {
				t.Errorf("generation handled = %v, want %v", o, handled)
			}
			if diff := cmp.Diff(before.RunRefs, got.Status.RunRefs); diff != "" {
				t.Errorf("the failed poll changed the ledger (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(before.LastPollTime, got.Status.LastPollTime); diff != "" {
				t.Errorf("the failed poll changed lastPollTime (-before +after):\n%s", diff)
			}
			w.git.err = nil
			w.mustReconcile(t)
			if diff := cmp.Diff([]string{"Ready=True/Polled"}, conditions(w.repo(t))); diff != "" {
				t.Errorf("conditions once git is back (-want +got):\n%s", diff)
			}
			if n := len(w.runs(t)); n != 1 {
				t.Errorf("%d runs once git is back, want the run ref's one", n)
			}
		})
	}
}

// TestACreationThatFailsIsRetried: the API server failing to create a run
// fails the poll before its refs are recorded, so the next poll creates
// the run: a run is never lost.
func TestACreationThatFailsIsRetried(t *testing.T) {
	failing := true
	faults := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*taugridv1.TauRun); ok && failing {
			return apierrors.NewServerTimeout(taugridv1.GroupVersion.WithResource("tauruns").GroupResource(), "create", 1)
		}
		return c.Create(ctx, obj, opts...)
	}}
	w := newRepoWorld(t, faults, research().Obj())
	registered(w.git)
	w.mustReconcile(t)
	w.git.refs["refs/tau/runs/x"] = at(c1)
	ledger := w.repo(t).Status.RunRefs
	if _, err := w.reconcile(t); err == nil {
		t.Fatal("reconcile succeeded though the run could not be created")
	}
	if diff := cmp.Diff(ledger, w.repo(t).Status.RunRefs); diff != "" {
		t.Errorf("the failed poll recorded the refs (-before +after):\n%s", diff)
	}
	if evs := w.drain(); len(evs) > 0 {
		t.Errorf("events %q for a run not created", evs)
	}
	failing = false
	w.mustReconcile(t)
	if diff := cmp.Diff([]runSummary{want(taugridv1.TriggerRunRef, "refs/tau/runs/x", c1, "default", "", "")}, summarize(w.runs(t))); diff != "" {
		t.Errorf("runs after the retry (-want +got):\n%s", diff)
	}
}

// TestTheAPIServerFailingDuringAPollIsNotGit: a poll that cannot list the
// repository's TauRuns (the API server, not the remote) is retried with
// backoff, leaves the generation to do again, and does not say git is
// unavailable.
func TestTheAPIServerFailingDuringAPollIsNotGit(t *testing.T) {
	runsUnlisted := &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*taugridv1.TauRunList); ok {
			return apierrors.NewServiceUnavailable("etcd is slow")
		}
		return c.List(ctx, list, opts...)
	}}
	w := newRepoWorld(t, runsUnlisted, research().Obj())
	registered(w.git)
	w.git.refs["refs/tau/runs/x"] = at(c1)
	if _, err := w.reconcile(t); err == nil {
		t.Fatal("no error: a failure of the API server was not retried with backoff")
	}
	got := w.repo(t)
	for _, c := range conditions(got) {
		if c == "Ready=False/GitUnavailable" {
			t.Errorf("conditions %v: the API server's failure is reported as git's", conditions(got))
		}
	}
	if got.Status.ObservedGeneration == got.Generation {
		t.Error("observedGeneration moved: the generation was not handled")
	}
}

// TestAStallLiftsOnceItsCauseIsFixed: a repository stalled for its missing
// credentials Secret is not left Stalled once the Secret exists, even when
// the poll that follows fails.
func TestAStallLiftsOnceItsCauseIsFixed(t *testing.T) {
	w := newRepoWorld(t, nil, research().CredentialsSecret("git-creds").Obj())
	registered(w.git)
	w.mustReconcile(t)
	if diff := cmp.Diff([]string{"Ready=False/MissingSecret", "Stalled=True/MissingSecret"}, conditions(w.repo(t))); diff != "" {
		t.Fatalf("conditions (-want +got):\n%s", diff)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-creds", Namespace: ns}, Data: map[string][]byte{gitsource.SecretToken: []byte("t")}}
	if err := w.c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	w.git.err = gitError(gitsource.ErrAuth)
	_, _ = w.reconcile(t)
	if diff := cmp.Diff([]string{"Ready=False/GitUnavailable"}, conditions(w.repo(t))); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}
