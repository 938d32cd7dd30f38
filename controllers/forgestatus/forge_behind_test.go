package forgestatus

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// When the credential's pace is spent, a commit's context waits for its
// turn, and what goes then is the run's state at that moment: the states
// it passed through meanwhile are never posted, and none is posted out of
// order. Once it has gone, nothing is counted as waiting.
func TestABehindForgeGetsOnlyTheLatestStateOfEachCommit(t *testing.T) {
	w := newForgeWorld(t, nil, func(api string) []client.Object {
		return []client.Object{forgeRepo(api, "forge").Obj(), queuedRun("submitted to queue runs").Obj()}
	})
	w.posters.Buckets = &forge.Buckets{Rate: rate.Every(10 * time.Second), Burst: 1}
	r := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters}
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "r"}
	reconcileAt := func() reconcile.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	move := func(phase taugridv1.RunPhase, msg string) {
		t.Helper()
		run := w.run(t, "r")
		base := run.DeepCopy()
		run.Status.Phase, run.Status.Message = phase, msg
		run.Status.Conditions = []metav1.Condition{}
		if err := w.c.Status().Patch(ctx, run, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}

	reconcileAt() // queued: the bucket's one token
	move(taugridv1.PhaseAdmitted, "admitted; the Job is creating its pods (0 of 1)")
	w.clock.Step(time.Second)
	first := reconcileAt()
	if first.RequeueAfter <= 0 || first.RequeueAfter > 9*time.Second {
		t.Fatalf("admitted with the pace spent: requeued after %s, want the 9s to its turn", first.RequeueAfter)
	}
	move(taugridv1.PhaseRunning, "running")
	w.clock.Step(time.Second)
	if again := reconcileAt(); again.RequeueAfter != first.RequeueAfter-time.Second {
		t.Errorf("running, a second later: requeued after %s, want the same turn (%s)", again.RequeueAfter, first.RequeueAfter-time.Second)
	}
	if n := w.posters.Buckets.Waiting(); n != 1 {
		t.Errorf("%d posts counted as waiting, want 1 (one commit and context)", n)
	}
	w.clock.Step(first.RequeueAfter)
	reconcileAt()
	// Gitea has no running state: a run in progress is pending there.
	want := []string{"201 pending tau/default r: queued in runs", "201 pending tau/default r: running"}
	if d := cmp.Diff(want, w.posted()); d != "" {
		t.Errorf("posted (-want +got):\n%s", d)
	}
	if n := w.posters.Buckets.Waiting(); n != 0 {
		t.Errorf("%d posts counted as waiting once the latest went, want 0", n)
	}
}
