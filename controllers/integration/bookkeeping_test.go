package integration

import (
	"context"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	"github.com/taugrid/taugrid/controllers/shared"
)

// TestAPlatformMadeUnreadyByAGitOutageRecoversWithoutANewCommit: the
// forge goes down after the policy was applied; the platform says so
// (Ready=False, GitUnavailable), and is Ready again at the first poll after
// the forge comes back, at the same commit: nobody has to push.
func TestAPlatformMadeUnreadyByAGitOutageRecoversWithoutANewCommit(t *testing.T) {
	f := newPlatformFrom(t, examplePlatformCopy(t, "pgo"))
	ctx := context.Background()
	commit := f.repo.git("-C", f.repo.work, "rev-parse", "HEAD")
	if p := f.reconcile(t); !apimeta.IsStatusConditionTrue(p.Status.Conditions, taugridv1.ConditionReady) {
		t.Fatalf("platform not ready before the outage: %+v", p.Status.Conditions)
	}

	end := f.repo.outage()
	_, err := f.r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: f.name}})
	if !gitsource.Transient(err) {
		t.Fatalf("reconcile during the outage: %v; want a transient git error, retried with backoff", err)
	}
	p := &taugridv1.TauPlatform{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: f.name}, p); err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != shared.ReasonGitUnavailable {
		t.Fatalf("Ready during the outage = %+v, want False (%s)", c, shared.ReasonGitUnavailable)
	}

	end()
	p = f.reconcile(t)
	ready := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != platformctrl.ReasonPolicyApplied || p.Status.Commit != commit {
		t.Errorf("after the outage: Ready %+v, commit %s; want Ready=True (%s) at %s without a new commit", ready, p.Status.Commit, platformctrl.ReasonPolicyApplied, commit)
	}
}

// TestAFailedPollDuringATriggerChangeStillBaselinesTheNewBranch: a branch
// becomes watched while the forge is down. The failed poll must not count
// the new triggers as handled: the first poll that works takes the
// branch's head as it is for history (no run for old commits), and a
// change after that starts a run.
func TestAFailedPollDuringATriggerChangeStillBaselinesTheNewBranch(t *testing.T) {
	f := newRunFixture(t, "bk1")
	ctx := context.Background()
	end := f.research.outage()
	patch := client.MergeFrom(f.repo.DeepCopy())
	f.repo.Spec.Triggers.Branches = []string{"main"}
	if err := k8s.Patch(ctx, f.repo, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := f.repos.Reconcile(ctx, requestFor(f.repo)); !gitsource.Transient(err) {
		t.Fatalf("poll during the outage: %v; want a transient git error", err)
	}

	end()
	f.poll(t)
	if runs := f.listRuns(t); len(runs) != 0 {
		t.Fatalf("%d runs for main's history once the forge is back, want 0: its head was there before it was watched", len(runs))
	}
	f.research.edit("tau/ray.yaml", "timeout: 12h", "timeout: 6h")
	changed := f.research.commit("shorter ray runs")
	f.poll(t)
	if runs := f.listRuns(t); len(runs) != 1 || runs[0].Spec.Commit != changed {
		t.Errorf("after a change on the newly watched branch: %d runs, want 1 at %s", len(runs), changed)
	}
}
