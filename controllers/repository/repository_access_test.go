package repository

import (
	"context"
	"errors"
	"github.com/taugrid/taugrid/test/builders"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// secretsUnreadable makes every Secret read fail as an overloaded API
// server does: a transient error.
var secretsUnreadable = &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		return apierrors.NewServiceUnavailable("etcd is slow")
	}
	return c.Get(ctx, key, obj, opts...)
}}

// TestReconcileAccess covers how access ends besides the stalls of
// TestRepositoryReconcileBranches: polled, waiting, or retried with backoff
// (a transient error: nothing said, the generation not handled).
func TestReconcileAccess(t *testing.T) {
	cases := map[string]struct {
		repo       *taugridv1.TauRepository
		objs       []client.Object
		policyErr  error // of the policy provider; nil serves the example policy
		faults     *interceptor.Funcs
		wantErr    bool
		conditions []string
		observed   bool // status.observedGeneration is the generation
		polled     bool // git was asked
	}{
		"credentials in a Secret that exists: the repository is polled": {
			repo: research().CredentialsSecret("git").Obj(), objs: []client.Object{secret("git", map[string]string{gitsource.SecretToken: "t0ken"})},
			conditions: []string{"Ready=True/Polled"}, observed: true, polled: true},
		"no credentials at all: a public repository is polled": {
			repo: research().Obj(), conditions: []string{"Ready=True/Polled"}, observed: true, polled: true},
		"a credentials Secret the API server cannot read now: retried with backoff, nothing said": {
			repo: research().CredentialsSecret("git").Obj(), objs: []client.Object{secret("git", nil)}, faults: secretsUnreadable,
			wantErr: true},
		"a platform whose TauPlatform is not there yet: waited for": {
			repo: research().Obj(), policyErr: apierrors.NewNotFound(schema.GroupResource{Group: "taugrid.dev", Resource: "tauplatforms"}, "default"),
			conditions: []string{"Ready=False/WaitingForPolicy"}},
		"a policy that cannot be read now: retried with backoff, nothing said": {
			repo: research().Obj(), policyErr: errors.New("the policy cache is cold"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepoWorld(t, tc.faults, append([]client.Object{tc.repo}, tc.objs...)...)
			if tc.policyErr != nil {
				w.r.Policies = filePolicy{err: tc.policyErr}
			}
			res, err := w.reconcile(t)
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile error = %v, want error: %v", err, tc.wantErr)
			}
			if !tc.wantErr && (res.RequeueAfter < time.Minute || res.RequeueAfter > 66*time.Second) {
				t.Errorf("requeue after %s, want the interval (1m) plus at most a tenth", res.RequeueAfter)
			}
			got := w.repo(t)
			if diff := cmp.Diff(tc.conditions, conditions(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if o := got.Status.ObservedGeneration == got.Generation; o != tc.observed {
				t.Errorf("observedGeneration %d at generation %d: handled = %v, want %v", got.Status.ObservedGeneration, got.Generation, o, tc.observed)
			}
			if p := w.git.polls > 0; p != tc.polled {
				t.Errorf("git polled = %v, want %v", p, tc.polled)
			}
		})
	}
}

// TestARepositoryLeftAloneIsNotPolled: a suspended repository, or one
// being deleted, is neither polled nor written.
func TestARepositoryLeftAloneIsNotPolled(t *testing.T) {
	cases := map[string]*taugridv1.TauRepository{
		"a suspended repository":      research().Suspended().Obj(),
		"a repository being deleted":  research().RepositoryDeleting("example.com/hold").Obj(),
		"a suspended, nudged one too": research().Suspended().Nudged("2026-06-01T12:00:00Z").Obj(),
	}
	for name, repo := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepoWorld(t, nil, repo)
			before := w.repo(t)
			res, err := w.reconcile(t)
			if err != nil || res.RequeueAfter != 0 {
				t.Errorf("result %+v, %v; want nothing to do", res, err)
			}
			if w.git.lists+w.git.polls > 0 {
				t.Errorf("git asked %d times, want none", w.git.lists+w.git.polls)
			}
			if diff := cmp.Diff(before, w.repo(t)); diff != "" {
				t.Errorf("repository written (-before +after):\n%s", diff)
			}
		})
	}
}

// TestAStalledRepositoryRecoversOnceItsSecretExists: Stalled goes when the
// human's fix is there, and the generation stays handled throughout.
func TestAStalledRepositoryRecoversOnceItsSecretExists(t *testing.T) {
	w := newRepoWorld(t, nil, research().RepositoryGeneration(3).CredentialsSecret("git").Obj())
	w.mustReconcile(t)
	if diff := cmp.Diff([]string{"Ready=False/MissingSecret", "Stalled=True/MissingSecret"}, conditions(w.repo(t))); diff != "" {
		t.Fatalf("conditions while the Secret is missing (-want +got):\n%s", diff)
	}
	if err := w.c.Create(context.Background(), secret("git", map[string]string{gitsource.SecretToken: "t0ken"})); err != nil {
		t.Fatal(err)
	}
	w.mustReconcile(t)
	got := w.repo(t)
	if diff := cmp.Diff([]string{"Ready=True/Polled"}, conditions(got)); diff != "" {
		t.Errorf("conditions once the Secret exists (-want +got):\n%s", diff)
	}
	for _, c := range got.Status.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %s at generation %d, want 3", c.Type, c.ObservedGeneration)
		}
	}
	if got.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d, want 3", got.Status.ObservedGeneration)
	}
}

// TestANudgeIsRecordedAsHandled: the nudge's value lands in
// status.lastHandledNudge whether the poll went well or stalled.
func TestANudgeIsRecordedAsHandled(t *testing.T) {
	cases := map[string]*taugridv1.TauRepository{
		"a poll":  research().Nudged("n1").Obj(),
		"a stall": research().Nudged("n1").CredentialsSecret("gone").Obj(),
	}
	for name, repo := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepoWorld(t, nil, repo)
			w.mustReconcile(t)
			if got := w.repo(t).Status.LastHandledNudge; got != "n1" {
				t.Errorf("lastHandledNudge = %q, want n1", got)
			}
		})
	}
}

// TestAGoneRepositoryForgetsItsPullRequestListing: a deleted repository's
// remembered forge listing is dropped, so a new one of the same name is
// listed afresh.
func TestAGoneRepositoryForgetsItsPullRequestListing(t *testing.T) {
	w := newRepoWorld(t, nil)
	w.r.PullRequests = &PullRequests{}
	repo := research().Obj()
	heads := map[string]string{"refs/pull/1/head": sha("a")}
	w.r.PullRequests.remember(repo, heads, sharedtest.Now)
	if _, err := w.reconcile(t); err != nil {
		t.Fatalf("reconcile of a gone repository: %v", err)
	}
	if w.r.PullRequests.listed(repo, heads, sharedtest.Now) {
		t.Error("the gone repository's listing is still remembered")
	}
	if _, ok := shared.MemoOf(&w.r.PullRequests.listings).Get(types.NamespacedName{Namespace: ns, Name: "research"}); ok {
		t.Error("the memo still holds the gone repository")
	}
}

// TestAnEncodedURLCannotLeaveTheTenantsPart: from the attacker's side, a
// team-a repository whose URL climbs into team-b's part of the forge
// through an encoding or a dot segment is refused, and nothing is polled.
func TestAnEncodedURLCannotLeaveTheTenantsPart(t *testing.T) {
	for _, u := range []string{
		"https://git.example.com/team-a/..%2fteam-b%2fsecret.git",
		"https://git.example.com/team-a/%2e%2e/team-b/secret.git",
		"https://git.example.com/team-a/..%252fteam-b%252fsecret.git",
	} {
		t.Run(u, func(t *testing.T) {
			w := newRepoWorld(t, nil, builders.MakeTauRepository("research", ns, u).Obj())
			if _, err := w.reconcile(t); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"Ready=False/" + ReasonNotAllowed, "Stalled=True/" + ReasonNotAllowed}, conditions(w.repo(t))); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if w.git.lists != 0 {
				t.Errorf("git listed %d times for a URL the tenant may not register", w.git.lists)
			}
		})
	}
}
