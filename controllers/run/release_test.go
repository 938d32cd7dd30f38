package run

import (
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// endedAgo is run r1, succeeded ago, its one attempt's workload a kind
// ("Job" or "RayJob") named r1-1.
func endedAgo(kind string, ago time.Duration) *taugridv1.TauRun {
	end := sharedtest.Now.Add(-ago)
	return builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseSucceeded, "succeeded").Entered(taugridv1.PhaseSucceeded, end).
		Workload(kind, "r1-1", "team-a-runs").Attempt("r1-1", end.Add(-time.Hour), time.Time{}, "").Obj()
}

// An ended run holds nothing: its Ray clusters and its pods still running
// are deleted at once; its RayJob is kept for the record, holding no pod,
// for the platform's ttl_after_finished (the annotation render sets), from
// when it ended, then deleted. A Job's own TTL does that for a Job.
func TestAnEndedRunHoldsNothingAndItsRecordGoesInTime(t *testing.T) {
	succeeded := func() *builders.RayJobBuilder {
		return builders.MakeRayJob("r1-1", ns, "python train.py").Status(rayv1.JobStatusSucceeded, rayv1.JobDeploymentStatusComplete, "")
	}
	head := builders.MakeAttemptPod("r1-1-head", ns, "r1", 1).OnNode("n1").Running().Obj()
	submitter := builders.MakeAttemptPod("r1-1-submitter", ns, "r1", 1).OnNode("n1").Exited(0).Obj()
	others := builders.MakeAttemptPod("r2-1-0", ns, "r2", 1).OnNode("n1").Running().Obj()
	cluster := builders.MakeRayCluster("r1-1-raycluster", ns, "r1", 1).Obj()
	cases := map[string]struct {
		objs    []client.Object
		requeue time.Duration
		gone    []client.Object
		kept    []client.Object
	}{
		"30m after its end, with an hour to keep: the record stays 30m more; the cluster and the live pod go": {
			objs:    []client.Object{endedAgo("RayJob", 30*time.Minute), succeeded().KeptFor(3600).EndedAt(sharedtest.Now.Add(-30 * time.Minute)).Obj()},
			requeue: 30 * time.Minute,
			gone:    []client.Object{cluster, head}, kept: []client.Object{succeeded().Obj(), submitter, others}},
		"2h after its end, with an hour to keep: the RayJob goes": {
			objs: []client.Object{endedAgo("RayJob", 2*time.Hour), succeeded().KeptFor(3600).EndedAt(sharedtest.Now.Add(-2 * time.Hour)).Obj()},
			gone: []client.Object{succeeded().Obj(), cluster, head}, kept: []client.Object{submitter, others}},
		"a RayJob KubeRay gave no end time counts from the run's end": {
			objs:    []client.Object{endedAgo("RayJob", 50*time.Minute), succeeded().KeptFor(3600).Obj()},
			requeue: 10 * time.Minute,
			gone:    []client.Object{cluster, head}, kept: []client.Object{succeeded().Obj()}},
		"a RayJob that says nothing of keeping is left as it is": {
			objs: []client.Object{endedAgo("RayJob", 48*time.Hour), succeeded().Obj()},
			gone: []client.Object{cluster, head}, kept: []client.Object{succeeded().Obj()}},
		"an ended Job's live pod goes; the Job is left to its own TTL": {
			objs: []client.Object{endedAgo("Job", 48*time.Hour), job(builders.MakeJob("r1-1", ns).Unsuspended().Condition(batchv1.JobComplete, "", ""))},
			gone: []client.Object{head}, kept: []client.Object{job(builders.MakeJob("r1-1", ns)), submitter, others}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, nil, append(tc.objs, head, submitter, others, cluster)...)
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			for _, o := range tc.gone {
				if w.holds(t, o) {
					t.Errorf("%T %s is still there", o, o.GetName())
				}
			}
			for _, o := range tc.kept {
				if !w.holds(t, o) {
					t.Errorf("%T %s was deleted", o, o.GetName())
				}
			}
			if got := w.run(t, "r1"); got.Status.Phase != taugridv1.PhaseSucceeded {
				t.Errorf("phase %s: releasing changed the ended run", got.Status.Phase)
			}
			if e := w.reasons(); len(e) != 0 {
				t.Errorf("events %v: releasing announces nothing", e)
			}
		})
	}
}
