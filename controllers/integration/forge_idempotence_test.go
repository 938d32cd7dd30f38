package integration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/render"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (f *forgeFixture) getRun(t *testing.T, name string) *taugridv1.TauRun {
	t.Helper()
	run := &taugridv1.TauRun{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, run); err != nil {
		t.Fatal(err)
	}
	return run
}

// setForgeRecord writes status.forge as a controller that stopped midway
// would have left it.
func (f *forgeFixture) setForgeRecord(t *testing.T, name string, set func(*taugridv1.ForgeStatus)) {
	t.Helper()
	run := f.getRun(t, name)
	base := run.DeepCopy()
	if run.Status.Forge == nil {
		run.Status.Forge = &taugridv1.ForgeStatus{}
	}
	set(run.Status.Forge)
	if err := k8s.Status().Patch(context.Background(), run, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// A reconcile working from a copy of the run older than the last post (the
// cache's lag, seen on Gitea as "success: succeeded" twice) posts nothing.
func TestAReconcileFromAStaleCopyOfTheRunPostsNothing(t *testing.T) {
	f := newForgeFixture(t, "fs4", forge.Gitea, forgeToken)
	f.research.tag("run/stale")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/stale")
	f.mustReconcileForge(t, run.Name)
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))
	f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)
	beforePost := f.getRun(t, run.Name) // succeeded, the forge still shows "accepted"
	f.mustReconcileForge(t, run.Name)

	f.r.Client = laggingCache{Client: k8s, old: beforePost}
	for range 3 {
		f.mustReconcileForge(t, run.Name)
	}
	f.r = f.reconciler() // and after a restart, from the same stale copy
	f.r.Client = laggingCache{Client: k8s, old: beforePost}
	f.mustReconcileForge(t, run.Name)

	want := []string{"pending: accepted: preparing the run", "success: succeeded"}
	if diff := cmp.Diff(want, f.posted()); diff != "" {
		t.Errorf("posted statuses (-want +got):\n%s", diff)
	}
	if rec := f.getRun(t, run.Name).Status.Forge; rec == nil || rec.InFlight || rec.State != "success" || rec.Phase != taugridv1.PhaseSucceeded {
		t.Errorf("status.forge = %+v, want success in phase Succeeded, settled", rec)
	}
}

// A controller that stopped between posting and recording the post does
// not post it again; one that stopped between recording and posting posts
// it once. Either way it asks the forge once.
func TestAPostInterruptedByARestartIsSettledByReadingTheForge(t *testing.T) {
	f := newForgeFixture(t, "fs5", forge.Gitea, forgeToken)
	f.research.tag("run/restart")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/restart")
	f.mustReconcileForge(t, run.Name)

	// Posted, not recorded as done.
	f.setForgeRecord(t, run.Name, func(r *taugridv1.ForgeStatus) { r.InFlight = true })
	f.r = f.reconciler()
	f.mustReconcileForge(t, run.Name)
	f.mustReconcileForge(t, run.Name)
	if n, reads := len(f.srv.Calls()), f.srv.Reads(); n != 1 || reads != 1 {
		t.Errorf("after a restart past the post: %d posts and %d reads, want 1 and 1", n, reads)
	}

	// Recorded, never posted: the run was admitted and the controller
	// stopped before its call reached the forge.
	admitted := f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	want := forge.Desired(admitted)
	f.setForgeRecord(t, run.Name, func(r *taugridv1.ForgeStatus) {
		*r = taugridv1.ForgeStatus{Context: want.Context, State: string(want.State), Description: want.Description,
			Phase: taugridv1.PhaseAdmitted, PostedAt: metav1.NewTime(f.clock.Now()), InFlight: true}
	})
	f.r = f.reconciler()
	f.mustReconcileForge(t, run.Name)
	f.mustReconcileForge(t, run.Name)

	posts := []string{"pending: accepted: preparing the run", "pending: admitted in runs: starting"}
	if diff := cmp.Diff(posts, f.posted()); diff != "" {
		t.Errorf("posted statuses (-want +got):\n%s", diff)
	}
	if reads := f.srv.Reads(); reads != 2 {
		t.Errorf("%d reads of the forge, want 2 (one per interrupted post)", reads)
	}
	if rec := f.getRun(t, run.Name).Status.Forge; rec == nil || rec.InFlight {
		t.Errorf("status.forge = %+v, want it settled", rec)
	}
}
