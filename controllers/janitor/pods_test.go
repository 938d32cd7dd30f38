package janitor

import (
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSweepPods covers stuckPods and endedRunPods: TauGrid's pods
// terminating past IdleAfter on a node that is gone or not ready (deleted
// at once, grace 0: no kubelet will confirm them), and pods still holding
// accelerators a minute after their attempt ended or their run went
// (deleted, with the Ray cluster that would recreate them); each case in
// report mode (nothing deleted) and release mode.
func TestSweepPods(t *testing.T) {
	stuck := func(node string) *builders.AttemptPodBuilder {
		return builders.MakeAttemptPod("stuck", ns, "train", 1).ManagedByTauGrid().OnNode(node).TerminatingSince(ago(20 * time.Minute))
	}
	stuckOn := func(node string) []Finding {
		return []Finding{{Reason: ReasonStuckTerminating, Object: "Pod/team-a/stuck",
			Message: "terminating for 20m0s on node " + node + ", which is gone or not ready"}}
	}
	gpuPod := func(run string, attempt int) *builders.AttemptPodBuilder {
		return builders.MakeAttemptPod("worker-0", ns, run, attempt).ManagedByTauGrid().OnNode("gpu-1").GPUs(8).Running()
	}
	run := func() *builders.TauRunBuilder { return builders.MakeTauRun("train", ns) }
	endedAgo := func(d string) []Finding {
		return []Finding{{Reason: ReasonEndedRunPod, Object: "Pod/team-a/worker-0",
			Message: "holds nvidia.com/gpu for attempt 1 of run train, which ended " + d + " ago"}}
	}
	cases := map[string]struct {
		objs     []client.Object
		want     []Finding
		released []string // deleted in release mode
	}{
		"a pod terminating past IdleAfter on a node that is gone": {
			objs: []client.Object{stuck("gone").Obj()},
			want: stuckOn("gone"), released: []string{"Pod team-a/stuck grace=0"},
		},
		"a pod terminating past IdleAfter on a node not ready": {
			objs: []client.Object{stuck("gpu-1").Obj(), builders.MakeGPUNode("gpu-1").NotReady().Obj()},
			want: stuckOn("gpu-1"), released: []string{"Pod team-a/stuck grace=0"},
		},
		"a pod terminating on a Ready node is its kubelet's": {
			objs: []client.Object{stuck("gpu-1").Obj(), builders.MakeGPUNode("gpu-1").Obj()},
		},
		"a pod terminating for less than IdleAfter is given time": {
			objs: []client.Object{builders.MakeAttemptPod("stuck", ns, "train", 1).ManagedByTauGrid().OnNode("gone").
				TerminatingSince(ago(idleAfter - time.Second)).Obj()},
		},
		"a pod terminating that was never scheduled has no node to wait for": {
			objs: []client.Object{stuck("").Obj()},
		},
		"a pod terminating that is not TauGrid's is never judged": {
			objs: []client.Object{builders.MakeAttemptPod("stuck", ns, "train", 1).OnNode("gone").TerminatingSince(ago(time.Hour)).Obj()},
		},
		"a pod holding GPUs for a run that is gone": {
			objs:     []client.Object{gpuPod("gone", 1).Obj()},
			want:     []Finding{{Reason: ReasonEndedRunPod, Object: "Pod/team-a/worker-0", Message: "holds nvidia.com/gpu for run gone, which no longer exists"}},
			released: []string{"Pod team-a/worker-0"},
		},
		"a pod holding GPUs for an attempt a later one replaced, with no end recorded": {
			objs: []client.Object{gpuPod("train", 1).Obj(),
				run().Phase(taugridv1.PhaseRunning, "").Attempt("train-1", ago(time.Hour), time.Time{}, "").Attempt("train-2", ago(time.Minute), time.Time{}, "").Obj()},
			want: []Finding{{Reason: ReasonEndedRunPod, Object: "Pod/team-a/worker-0",
				Message: "holds nvidia.com/gpu for attempt 1 of run train, which a later attempt replaced"}},
			released: []string{"Pod team-a/worker-0"},
		},
		"a pod holding GPUs five minutes after its attempt ended": {
			objs: []client.Object{gpuPod("train", 1).Obj(),
				run().Phase(taugridv1.PhaseQueued, "").Attempt("train-1", ago(time.Hour), ago(5*time.Minute), taugridv1.FailureClass("NodeFailure")).Obj()},
			want: endedAgo("5m0s"), released: []string{"Pod team-a/worker-0"},
		},
		"a pod of a run that ended in its last attempt, no end recorded, counts from the run's end": {
			objs: []client.Object{gpuPod("train", 1).Obj(),
				run().Phase(taugridv1.PhaseFailed, "").Entered(taugridv1.PhaseFailed, ago(10*time.Minute)).
					Attempt("train-1", ago(time.Hour), time.Time{}, "").Obj()},
			want: endedAgo("10m0s"), released: []string{"Pod team-a/worker-0"},
		},
		"a Ray worker pod of an ended attempt goes with its Ray cluster": {
			objs: []client.Object{gpuPod("train", 1).ControlledBy("RayCluster", "train-1-raycluster").Obj(),
				builders.MakeRayCluster("train-1-raycluster", ns, "train", 1).Obj(),
				run().Phase(taugridv1.PhaseQueued, "").Attempt("train-1", ago(time.Hour), ago(5*time.Minute), "").Obj()},
			want:     endedAgo("5m0s"),
			released: []string{"RayCluster team-a/train-1-raycluster", "Pod team-a/worker-0"},
		},
		"a pod whose attempt ended less than a minute ago is the run reconciler's": {
			objs: []client.Object{gpuPod("train", 1).Obj(),
				run().Phase(taugridv1.PhaseQueued, "").Attempt("train-1", ago(time.Hour), ago(59*time.Second), "").Obj()},
		},
		"a pod of an attempt still running": {
			objs: []client.Object{gpuPod("train", 1).Obj(), run().Phase(taugridv1.PhaseRunning, "").Attempt("train-1", ago(time.Hour), time.Time{}, "").Obj()},
		},
		"a pod whose attempt label is not a number is not judged": {
			objs: []client.Object{func() client.Object {
				p := gpuPod("train", 1).Obj()
				p.Labels["taugrid.dev/attempt"] = "first"
				return p
			}(), run().Phase(taugridv1.PhaseFailed, "").Attempt("train-1", ago(time.Hour), ago(time.Hour), "").Obj()},
		},
	}
	for name, tc := range cases {
		for _, mode := range []JanitorMode{JanitorReport, JanitorRelease} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				w := newJanitor(t, mode, nil, tc.objs...)
				w.checkSweep(t, mode, tc.want, tc.released)
			})
		}
	}
}
