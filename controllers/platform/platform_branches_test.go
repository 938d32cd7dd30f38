package platform

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestPlatformSourceBranches covers each way a reconcile ends at or
// before the source step (reconcileSource): what it says in conditions
// and events, whether the generation counts as handled, whether the
// error goes back to the rate limiter, and which commit it then applies.
// A human must fix a missing Secret, a refused login or a missing ref
// (Stalled, or Ready=False, handled, no retry but the poll); an API server
// or git host that cannot answer now is retried with backoff and counts
// as nothing handled.
func TestPlatformSourceBranches(t *testing.T) {
	secretUnavailable := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewServiceUnavailable("etcd is busy")
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	statusConflict := interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
		return apierrors.NewConflict(schema.GroupResource{Group: "taugrid.dev", Resource: "tauplatforms"}, platformName, nil)
	}}
	credentials := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "platform-git", Namespace: "taugrid-system"},
		Data: map[string][]byte{gitsource.SecretUsername: []byte("bot"), gitsource.SecretToken: []byte("s3cret")}}
	unreachable := &gitsource.Error{Op: "list", URL: platformURL, Kind: gitsource.ErrUnreachable, Detail: "connection refused"}
	refused := &gitsource.Error{Op: "list", URL: platformURL, Kind: gitsource.ErrAuth}
	applied := []string{"Ready=True/PolicyApplied"}
	cases := map[string]struct {
		platform *taugridv1.TauPlatform // nil: none
		objs     []client.Object
		faults   *interceptor.Funcs
		git      func(g *fakeGit)
		wantErr  bool
		want     []string // conditions
		message  string   // of the condition that says why not, if any
		observed bool
		commit   string   // status.commit after
		events   []string // type and reason
		lists    int
		auth     []gitsource.Credentials // each listing's, when it matters
		// unrecorded: the status patch fails, nothing of the reconcile is kept
		unrecorded bool
	}{
		"a platform that does not exist is nothing to do": {},
		"a suspended platform is not polled, its policy stays": {
			platform: platform().PlatformSuspended().InForce(sha("a")).Obj(),
			commit:   sha("a"),
		},
		"a platform being deleted is not polled": {
			platform: platform().PlatformDeleting("example.com/keep").InForce(sha("a")).Obj(),
			commit:   sha("a"),
		},
		"a credentials Secret that does not exist stalls it: a human creates it": {
			platform: platform().PlatformSecret("platform-git").Obj(),
			want:     []string{"Stalled=True/GitUnavailable"},
			message:  "credentials Secret not found: taugrid-system/platform-git",
			observed: true,
		},
		"a Secret the API server cannot give now is retried with backoff": {
			platform: platform().PlatformSecret("platform-git").Obj(),
			objs:     []client.Object{credentials},
			faults:   &secretUnavailable,
			wantErr:  true,
		},
		"the Secret's credentials are the ones git is asked with": {
			platform: platform().PlatformSecret("platform-git").Obj(),
			objs:     []client.Object{credentials},
			want:     applied, observed: true, commit: sha("a"), events: []string{"Normal PolicyApplied"}, lists: 1,
			auth: []gitsource.Credentials{{Username: "bot", Token: "s3cret"}},
		},
		"a git host that cannot be reached is retried with backoff": {
			platform: platform().Obj(),
			git:      func(g *fakeGit) { g.listErr = unreachable },
			wantErr:  true,
			want:     []string{"Ready=False/GitUnavailable"},
			message:  unreachable.Error(),
			lists:    1,
		},
		"a git host that refuses the login waits for a human, polled at the interval": {
			platform: platform().Obj(),
			git:      func(g *fakeGit) { g.listErr = refused },
			want:     []string{"Ready=False/GitUnavailable"},
			message:  refused.Error(),
			observed: true,
			lists:    1,
		},
		"a ref the repository lacks stalls it": {
			platform: platform().Obj(),
			git:      func(g *fakeGit) { delete(g.refs, mainRef) },
			want:     []string{"Stalled=True/RefNotFound"},
			message:  "refs/heads/main not found in " + platformURL,
			observed: true,
			lists:    1,
		},
		"a status the API server does not take is retried with backoff, the verdict unrecorded": {
			platform: platform().Obj(),
			faults:   &statusConflict,
			wantErr:  true, unrecorded: true,
			events: []string{"Normal PolicyApplied"},
			lists:  1,
		},
		"a ref given in full is followed as given, an annotated tag to its commit": {
			platform: platform().PlatformRef("refs/tags/v1").Obj(),
			git: func(g *fakeGit) {
				g.trees[sha("b")] = g.trees[sha("a")]
				g.refs["refs/tags/v1"] = gitsource.Ref{SHA: sha("7"), Peeled: sha("b")}
			},
			want: applied, observed: true, commit: sha("b"), events: []string{"Normal PolicyApplied"}, lists: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := tc.objs
			if tc.platform != nil {
				objs = append(objs, tc.platform)
			}
			w := newWorld(t, tc.faults, objs...)
			w.git.push(sha("a"), exampleTree(t, nil))
			if tc.git != nil {
				tc.git(w.git)
			}
			res, err := w.reconcile(t)
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile: %v; want an error: %v", err, tc.wantErr)
			}
			if w.git.lists != tc.lists {
				t.Errorf("git listed %d times, want %d", w.git.lists, tc.lists)
			}
			if diff := cmp.Diff(tc.auth, w.git.auth); tc.auth != nil && diff != "" {
				t.Errorf("credentials git was asked with (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.events, reasons(w.drain())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tc.platform == nil {
				return
			}
			p := w.platform(t)
			if diff := cmp.Diff(tc.want, conditions(p)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got := whyNot(p); tc.message != "" && got != tc.message {
				t.Errorf("message = %q, want %q", got, tc.message)
			}
			if got := p.Status.ObservedGeneration == p.Generation; got != tc.observed {
				t.Errorf("observedGeneration %d at generation %d: handled = %v, want %v", p.Status.ObservedGeneration, p.Generation, got, tc.observed)
			}
			if p.Status.Commit != tc.commit {
				t.Errorf("commit in force = %q, want %q", p.Status.Commit, tc.commit)
			}
			if polled, want := polledAt(p), pollTime(tc.lists, tc.unrecorded); !polled.Equal(want) {
				t.Errorf("last poll at %v, want %v", polled, want)
			}
			if err == nil && tc.lists > 0 && (res.RequeueAfter < time.Minute || res.RequeueAfter > time.Minute+6*time.Second) {
				t.Errorf("polls again after %v, want the 1m interval with at most 10%% jitter", res.RequeueAfter)
			}
		})
	}
}

// whyNot is the message of the condition that says why a platform is not
// Ready: Stalled if set, else Ready.
func whyNot(p *taugridv1.TauPlatform) string {
	if m := condition(p, taugridv1.ConditionStalled); m != "" {
		return m
	}
	return condition(p, taugridv1.ConditionReady)
}

// pollTime is when the platform was last polled after lists listings:
// sharedtest.Now, or never (nothing listed, or its status not recorded).
func pollTime(lists int, unrecorded bool) time.Time {
	if lists == 0 || unrecorded {
		return time.Time{}
	}
	return sharedtest.Now
}
