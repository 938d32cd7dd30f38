package janitor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The objects of the reservation table: attempt 1 of run "train", its Job
// train-1 (or RayJob ray-1) and Kueue's Workload for it.
var (
	trainJob = func() *builders.JobBuilder { return builders.MakeJob("train-1", ns).JobUID("job-uid") }
	trainWL  = func() *builders.WorkloadBuilder {
		return builders.MakeWorkload("job-train-1", ns).OwnedByJob(trainJob().Obj())
	}
	trainRun = func() *builders.TauRunBuilder { return builders.MakeTauRun("train", ns).UID("run-uid") }
	rayJob   = func() *builders.RayJobBuilder {
		return builders.MakeRayJob("ray-1", ns, "python train.py").RayJobUID("ray-uid").ManagedByTauGrid()
	}
	// jobPod is a pod of train-1, without accelerators (so that only the
	// reservation checks look at it).
	jobPod = func() *builders.AttemptPodBuilder {
		return builders.MakeAttemptPod("train-1-pod", ns, "train", 1).ManagedByTauGrid().ControlledBy("Job", "train-1")
	}
)

// idle is the finding of train-1's Job, admitted an hour ago.
var idle = Finding{Reason: ReasonIdleReservation, Object: "Job/team-a/train-1",
	Message: "admitted 1h0m0s ago in queue runs with no pod running and no run following it"}

// TestSweepReservations covers checkWorkload: which reservations are held
// for nothing (a TauGrid Workload whose job is gone, a RayJob KubeRay
// refused, a TauGrid job admitted long ago that runs nothing and no run
// follows) and which are not the janitor's to judge; each case swept in
// report mode (nothing deleted) and in release mode (the job and its
// Workload deleted), with an event per finding on the object acted on.
func TestSweepReservations(t *testing.T) {
	orphan := Finding{Reason: ReasonOrphanedReservation, Object: "Workload/team-a/job-train-1",
		Message: "holds quota in queue runs for Job train-1, which no longer exists"}
	jobAndWorkload := []string{"Job team-a/train-1", "Workload team-a/job-train-1"}
	unreachable := errors.New("worker-1: connection refused")
	cases := map[string]struct {
		objs     []client.Object
		workers  map[string]any // a worker's objects ([]client.Object), or the error reaching it
		want     []Finding
		released []string // deleted in release mode
	}{
		"a Workload TauGrid labelled whose Job is gone is an orphan": {
			objs: []client.Object{trainWL().ManagedByTauGrid().AdmittedAt(ago(time.Minute)).Obj()},
			want: []Finding{orphan}, released: []string{"Workload team-a/job-train-1"},
		},
		"a Workload whose gone Job a TauRun records as its attempt's is an orphan": {
			objs: []client.Object{trainWL().AdmittedAt(ago(time.Minute)).Obj(),
				trainRun().Attempt("train-1", ago(time.Hour), time.Time{}, "").Obj()},
			want: []Finding{orphan}, released: []string{"Workload team-a/job-train-1"},
		},
		"a Workload whose Job was replaced by another of its name is an orphan": {
			objs: []client.Object{trainJob().JobUID("recreated-uid").ManagedByTauGrid().Obj(),
				trainWL().ManagedByTauGrid().AdmittedAt(ago(time.Minute)).Obj()},
			want: []Finding{{Reason: ReasonOrphanedReservation, Object: "Workload/team-a/job-train-1",
				Message: "holds quota in queue runs for Job train-1, which was deleted and replaced by another of that name"}},
			released: []string{"Workload team-a/job-train-1"},
		},
		"a replaced Job's Workload that nothing says is TauGrid's is left to its owner": {
			objs: []client.Object{trainJob().JobUID("recreated-uid").Obj(), trainWL().AdmittedAt(ago(time.Hour)).Obj()},
		},
		"a gone Job's Workload that nothing says is TauGrid's is left to its owner": {
			objs: []client.Object{trainWL().AdmittedAt(ago(time.Hour)).Obj()},
		},
		"a gone Job's Workload whose run of that name never had that attempt is left": {
			objs: []client.Object{trainWL().AdmittedAt(ago(time.Hour)).Obj(),
				trainRun().Attempt("train-7", ago(time.Hour), time.Time{}, "").Obj()},
		},
		"a RayJob KubeRay refused still holds quota": {
			objs: []client.Object{
				rayJob().Status("", rayv1.JobDeploymentStatusValidationFailed, "spec.rayClusterSpec: head group missing\nat line 3").Obj(),
				builders.MakeWorkload("rayjob-ray-1", ns).OwnedByRayJob(rayJob().Obj()).AdmittedAt(ago(time.Minute)).Obj()},
			want: []Finding{{Reason: ReasonValidationFailed, Object: "RayJob/team-a/ray-1",
				Message: "KubeRay refused it (spec.rayClusterSpec: head group missing) but it still holds quota in queue runs"}},
			released: []string{"RayJob team-a/ray-1", "Workload team-a/rayjob-ray-1"},
		},
		"a TauGrid Job admitted an hour ago running no pod, no run following it, is idle": {
			objs:     []client.Object{trainJob().ManagedByTauGrid().Obj(), trainWL().AdmittedAt(ago(time.Hour)).Obj(), jobPod().Obj()},
			want:     []Finding{idle},
			released: jobAndWorkload,
		},
		"a Job whose pod runs is not idle": {
			objs: []client.Object{trainJob().ManagedByTauGrid().Obj(), trainWL().AdmittedAt(ago(time.Hour)).Obj(), jobPod().Running().Obj()},
		},
		"a Job admitted less than IdleAfter ago is given time": {
			objs: []client.Object{trainJob().ManagedByTauGrid().Obj(), trainWL().AdmittedAt(ago(idleAfter - time.Second)).Obj()},
		},
		"a Job holding quota but not admitted (an admission check pending) is Kueue's": {
			objs: []client.Object{trainJob().ManagedByTauGrid().Obj(), trainWL().ReservedAt(ago(time.Hour)).Obj()},
		},
		"a Job a live run follows is the run reconciler's": {
			objs: []client.Object{trainJob().ManagedByTauGrid().FollowedBy(trainRun().Obj()).Obj(), trainWL().AdmittedAt(ago(time.Hour)).Obj(),
				trainRun().Phase(taugridv1.PhaseAdmitted, "").Obj()},
		},
		"a Job whose run ended is followed by nothing": {
			objs: []client.Object{trainJob().ManagedByTauGrid().FollowedBy(trainRun().Obj()).Obj(), trainWL().AdmittedAt(ago(time.Hour)).Obj(),
				trainRun().Phase(taugridv1.PhaseFailed, "").Obj()},
			want: []Finding{idle}, released: jobAndWorkload,
		},
		"a Job whose run was replaced by another of its name is followed by nothing": {
			objs: []client.Object{trainJob().ManagedByTauGrid().FollowedBy(trainRun().Obj()).Obj(), trainWL().AdmittedAt(ago(time.Hour)).Obj(),
				trainRun().UID("another-run-uid").Phase(taugridv1.PhaseAdmitted, "").Obj()},
			want: []Finding{idle}, released: jobAndWorkload,
		},
		"a Job not TauGrid's is never judged, however idle": {
			objs: []client.Object{trainJob().Obj(), trainWL().AdmittedAt(ago(time.Hour)).Obj()},
		},
		"a Job dispatched to a worker whose pod runs there is not idle": {
			objs:    []client.Object{trainJob().ManagedByTauGrid().Obj(), trainWL().AdmittedAt(ago(time.Hour)).OnWorker("worker-1").Obj()},
			workers: map[string]any{"worker-1": []client.Object{jobPod().Running().Obj()}},
		},
		"a Job dispatched to a worker running nothing there is idle": {
			objs:    []client.Object{trainJob().ManagedByTauGrid().Obj(), trainWL().AdmittedAt(ago(time.Hour)).OnWorker("worker-1").Obj(), jobPod().Running().Obj()},
			workers: map[string]any{"worker-1": []client.Object{jobPod().Obj()}},
			want:    []Finding{idle}, released: jobAndWorkload,
		},
		"a Job dispatched to a worker that cannot be read counts as running": {
			objs:    []client.Object{trainJob().ManagedByTauGrid().Obj(), trainWL().AdmittedAt(ago(time.Hour)).OnWorker("worker-1").Obj()},
			workers: map[string]any{"worker-1": unreachable},
		},
	}
	for name, tc := range cases {
		for _, mode := range []JanitorMode{JanitorReport, JanitorRelease} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				var locator clusters.Locator
				if tc.workers != nil {
					ws := workers{}
					for cluster, v := range tc.workers {
						if objs, ok := v.([]client.Object); ok {
							v = sharedtest.NewClient(objs...)
						}
						ws[cluster] = v
					}
					locator = ws
				}
				w := newJanitor(t, mode, locator, tc.objs...)
				w.checkSweep(t, mode, tc.want, tc.released)
			})
		}
	}
}

// TestSweepFindsNothingOnAHealthyCluster: reservations, pods and holds
// that are all as they should be are no finding, and nothing is deleted or
// said, in either mode.
func TestSweepFindsNothingOnAHealthyCluster(t *testing.T) {
	running := trainRun().Phase(taugridv1.PhaseRunning, "").Attempt("train-1", ago(time.Hour), time.Time{}, "")
	objs := []client.Object{
		running.Obj(),
		trainJob().ManagedByTauGrid().FollowedBy(trainRun().Obj()).Obj(),
		trainWL().AdmittedAt(ago(time.Hour)).Obj(),
		jobPod().Running().OnNode("gpu-1").GPUs(8).Obj(),
		builders.MakeGPUNode("gpu-1").Obj(),
		// Pending, finished, deleted, unowned and foreign Workloads.
		builders.MakeWorkload("pending", ns).QuotaReserved(metav1.ConditionFalse, "waiting for quota").Obj(),
		builders.MakeWorkload("finished", ns).ManagedByTauGrid().AdmittedAt(ago(time.Hour)).
			WorkloadCondition(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", "", ago(time.Minute)).Obj(),
		builders.MakeWorkload("deleting", ns).ManagedByTauGrid().AdmittedAt(ago(time.Hour)).WorkloadDeleting("kueue.x-k8s.io/resource-in-use").Obj(),
		builders.MakeWorkload("unowned", ns).ManagedByTauGrid().AdmittedAt(ago(time.Hour)).Obj(),
		foreignWorkload(),
		// A pod terminating on a Ready node, one that ended, and one
		// asking for no accelerator.
		builders.MakeAttemptPod("closing", ns, "train", 1).ManagedByTauGrid().OnNode("gpu-1").TerminatingSince(ago(time.Hour)).Obj(),
		builders.MakeAttemptPod("done", ns, "old", 1).ManagedByTauGrid().GPUs(8).Exited(0).Obj(),
		builders.MakeAttemptPod("cpu", ns, "old", 1).ManagedByTauGrid().Running().Obj(),
	}
	for _, mode := range []JanitorMode{JanitorReport, JanitorRelease} {
		t.Run(string(mode), func(t *testing.T) {
			w := newJanitor(t, mode, nil, objs...)
			found, err := w.j.Sweep(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 0 || len(w.deleted) != 0 {
				t.Errorf("found %+v and deleted %v; want nothing", found, w.deleted)
			}
			if evs := w.drain(); len(evs) != 0 {
				t.Errorf("events %v, want none", evs)
			}
			if n := testutil.CollectAndCount(w.j.Metrics); n != 0 {
				t.Errorf("%d series of findings, want none", n)
			}
		})
	}
}

// foreignWorkload is a Workload of a job kind the janitor does not judge.
func foreignWorkload() *kueue.Workload {
	wl := builders.MakeWorkload("foreign", ns).AdmittedAt(ago(time.Hour)).Obj()
	controller := true
	wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "foreign", UID: "js", Controller: &controller}}
	return wl
}
