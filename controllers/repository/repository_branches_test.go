package repository

import (
	"context"
	"os"
	"testing"

	"github.com/taugrid/taugrid/policy"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// filePolicy is the example platform's policy as PolicyStore loads it
// from git, read from the files instead; err stands for a platform that
// has none yet.
type filePolicy struct {
	policy *render.Policy
	err    error
}

func (l filePolicy) Policy(context.Context, string) (*render.Policy, string, error) {
	return l.policy, "example", l.err
}

func examplePolicy(t testing.TB) *render.Policy {
	t.Helper()
	p, err := render.LoadPolicy(os.DirFS("../../examples/platform"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRepositoryReconcileBranches covers each way a repository's reconcile
// ends before it polls, on controller-runtime's fake client (milliseconds,
// no control plane): what it says, whether the generation counts as
// handled, and that it looks again at the interval.
func TestRepositoryReconcileBranches(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := taugridv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pol := examplePolicy(t)
	allowed := "https://git.example.com/team-a/research.git"
	cases := map[string]struct {
		repo     *taugridv1.TauRepository
		policy   filePolicy
		reason   string // of Ready=False
		stalled  bool
		observed bool // status.observedGeneration set: the generation was handled
	}{
		"the platform has no policy yet": {builders.MakeTauRepository("r", "team-a", allowed).Obj(),
			filePolicy{err: policy.ErrNoPolicyYet}, ReasonWaitingPolicy, false, false},
		"a namespace of no tenant": {builders.MakeTauRepository("r", "intruder", allowed).Obj(),
			filePolicy{policy: pol}, ReasonNotAllowed, true, true},
		"a URL the tenant may not register": {builders.MakeTauRepository("r", "team-a", "https://git.example.com/team-b/x.git").Obj(),
			filePolicy{policy: pol}, ReasonNotAllowed, true, true},
		"invalid triggers": {builders.MakeTauRepository("r", "team-a", allowed).RunTags("run/[").Obj(),
			filePolicy{policy: pol}, ReasonInvalidTrigger, true, true},
		// Stored before the CRD refused it: anyone who opens a pull
		// request writes refs/pull/.
		"a run ref prefix strangers write": {builders.MakeTauRepository("r", "team-a", allowed).RunRefPrefix("refs/pull/").Obj(),
			filePolicy{policy: pol}, ReasonInvalidTrigger, true, true},
		"a missing credentials Secret": {builders.MakeTauRepository("r", "team-a", allowed).CredentialsSecret("gone").Obj(),
			filePolicy{policy: pol}, ReasonMissingSecret, true, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.repo).WithStatusSubresource(tc.repo).Build()
			r := &RepositoryReconciler{Client: c, Policies: tc.policy, Clock: clocktesting.NewFakePassiveClock(metav1.Now().Time),
				Recorder: events.NewFakeRecorder(10)}
			res, err := r.Reconcile(context.Background(), requestFor(tc.repo))
			if err != nil || res.RequeueAfter < tc.repo.Spec.Interval.Duration {
				t.Errorf("result %+v, %v; want no error and a look again after the interval (%s)", res, err, tc.repo.Spec.Interval.Duration)
			}
			got := &taugridv1.TauRepository{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.repo), got); err != nil {
				t.Fatal(err)
			}
			ready := apimeta.FindStatusCondition(got.Status.Conditions, taugridv1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tc.reason {
				t.Errorf("Ready = %+v, want False (%s)", ready, tc.reason)
			}
			if s := apimeta.IsStatusConditionTrue(got.Status.Conditions, taugridv1.ConditionStalled); s != tc.stalled {
				t.Errorf("Stalled = %v, want %v", s, tc.stalled)
			}
			if o := got.Status.ObservedGeneration == got.Generation; o != tc.observed {
				t.Errorf("observedGeneration %d at generation %d: handled = %v, want %v", got.Status.ObservedGeneration, got.Generation, o, tc.observed)
			}
		})
	}
}

// requestFor is the reconcile request of o.
func requestFor(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
}
