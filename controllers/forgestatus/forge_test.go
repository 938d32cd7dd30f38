package forgestatus

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// queuedRun is run r queued in "runs", saying msg.
func queuedRun(msg string) *builders.TauRunBuilder {
	return builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseQueued, msg).Workload("Job", "r-1", "runs")
}

// record is a status.forge record of context "tau/default r", posted ago
// before sharedtest.Now.
func record(phase taugridv1.RunPhase, state, desc string, ago time.Duration) taugridv1.ForgeStatus {
	return taugridv1.ForgeStatus{Context: "tau/default r", State: state, Description: desc, Phase: phase,
		PostedAt: metav1.NewTime(sharedtest.Now.Add(-ago))}
}

func TestTheForgeReconcilerPostsEachNewStateOnce(t *testing.T) {
	queuedNow := record(taugridv1.PhaseQueued, "pending", "queued in runs", 0)
	explained := record(taugridv1.PhaseQueued, "pending", "queued #2 of 3 in runs", 20*time.Second)
	cases := map[string]struct {
		run     *taugridv1.TauRun // nil: none
		noRepo  bool
		noForge bool
		want    reconcile.Result
		posted  []string
		record  *taugridv1.ForgeStatus // status.forge after
	}{
		"a repository without spec.forge posts nothing": {
			run: queuedRun("").Obj(), noForge: true},
		"a run whose repository is gone posts nothing": {
			run: queuedRun("").Obj(), noRepo: true},
		"a run that is gone posts nothing": {},
		"a run being deleted posts nothing": {
			run: queuedRun("").Deleting("taugrid.dev/test").Obj()},
		"the first post of a queued run is recorded as the forge took it": {
			run:    queuedRun("submitted to queue runs").Obj(),
			posted: []string{"201 pending tau/default r: queued in runs"},
			record: &queuedNow},
		"a state posted before is not posted again": {
			run:    queuedRun("").ForgeRecord(explained).Phase(taugridv1.PhaseQueued, "queued #2 of 3 in runs").Obj(),
			record: &explained},
		"a new queue position 20s after the last post waits 40s": {
			run:  queuedRun("queued #1 of 3 in runs").ForgeRecord(explained).Obj(),
			want: reconcile.Result{RequeueAfter: 40 * time.Second}, record: &explained},
		"a new queue position a minute after the last post goes": {
			run:    queuedRun("queued #1 of 3 in runs").ForgeRecord(record(taugridv1.PhaseQueued, "pending", "queued #2 of 3 in runs", time.Minute)).Obj(),
			posted: []string{"201 pending tau/default r: queued #1 of 3 in runs"},
			record: new(record(taugridv1.PhaseQueued, "pending", "queued #1 of 3 in runs", 0))},
		"the final state goes at once, a second after a progress post": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseSucceeded, "").
				ForgeRecord(record(taugridv1.PhaseRunning, "running", "running", time.Second)).Obj(),
			posted: []string{"201 success tau/default r: succeeded"},
			record: new(record(taugridv1.PhaseSucceeded, "success", "succeeded", 0))},
		"an evidence link new on the same state is posted": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseSucceeded, "").EvidenceLink("https://tau.example/runs/team-a/r").
				ForgeRecord(record(taugridv1.PhaseSucceeded, "success", "succeeded", time.Hour)).Obj(),
			posted: []string{"201 success tau/default r: succeeded"},
			record: &taugridv1.ForgeStatus{Context: "tau/default r", State: "success", Description: "succeeded", Phase: taugridv1.PhaseSucceeded,
				TargetURL: "https://tau.example/runs/team-a/r", PostedAt: metav1.NewTime(sharedtest.Now)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newForgeWorld(t, nil, func(api string) []client.Object {
				var objs []client.Object
				switch {
				case tc.noForge:
					objs = append(objs, builders.MakeTauRepository("research", ns, repoURL).Obj())
				case !tc.noRepo:
					objs = append(objs, forgeRepo(api, "forge").Obj())
				}
				if tc.run != nil {
					objs = append(objs, tc.run)
				}
				return objs
			})
			r := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters}
			got, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "r"}})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.posted, w.posted()); d != "" {
				t.Errorf("posted (-want +got):\n%s", d)
			}
			if tc.run != nil {
				if d := cmp.Diff(tc.record, w.run(t, "r").Status.Forge); d != "" {
					t.Errorf("status.forge (-want +got):\n%s", d)
				}
			}
			if ev := w.drained(); len(ev) > 0 {
				t.Errorf("events %q, want none", ev)
			}
		})
	}
}
