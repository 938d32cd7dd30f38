package run

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// enteredAgo is run r1 with attempt r1-1 submitted, in phase since ago.
func enteredAgo(phase taugridv1.RunPhase, ago time.Duration) *taugridv1.TauRun {
	return builders.MakeTauRun("r1", ns).UID("u1").Phase(phase, "").Entered(phase, sharedtest.Now.Add(-ago)).
		Workload("Job", "r1-1", "team-a-runs").Attempt("r1-1", time.Time{}, time.Time{}, "").Obj()
}

// Kueue's words for a run that waits for quota, and for one no queue of
// its ClusterQueue can ever hold.
const (
	noQuotaNow = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 1 more needed"
	noRDMA     = "couldn't assign flavors to pod set main: resource rdma/ib unavailable in ClusterQueue"
)

// The deadlines of a run's attempt: the tau file's (or the platform's)
// max_queue_time for a queued one, an infeasible queue at once, and the
// platform's start_deadline (10m in the example platform) for an admitted
// one whose pods do not run. A run past one fails and releases its quota;
// one before it is looked at again when it falls due.
func TestTheDeadlinesOfAnAttempt(t *testing.T) {
	pulling := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Waiting("ImagePullBackOff", "Back-off pulling image").Obj()
	admitted := job(builders.MakeJob("r1-1", ns).Unsuspended())
	cases := map[string]struct {
		objs    []client.Object
		tau     []byte // nil: the example's, which sets no max_queue_time
		phase   taugridv1.RunPhase
		message string // its start
		stalled string // the Stalled condition, status/reason; "" when unset
		requeue time.Duration
		events  []string
		gone    []client.Object // deleted: the quota is released
	}{
		"queued for 2h under a max_queue_time of 1h: failed, its place in the queue released": {
			objs: []client.Object{enteredAgo(taugridv1.PhaseQueued, 2*time.Hour), job(builders.MakeJob("r1-1", ns)), pendingWorkloadOf(noQuotaNow)},
			tau:  tauWithLimits(t, "max_queue_time: 1h"), phase: taugridv1.PhaseFailed,
			message: "waited 2h0m0s in the queue, the limit (limits.max_queue_time) is 1h0m0s: ", stalled: "True/Failed",
			events: []string{"Warning Failed"}, gone: []client.Object{job(builders.MakeJob("r1-1", ns)), pendingWorkloadOf("")}},
		"queued for 20m under a max_queue_time of 1h: looked at again in 40m": {
			objs: []client.Object{enteredAgo(taugridv1.PhaseQueued, 20*time.Minute), job(builders.MakeJob("r1-1", ns)), pendingWorkloadOf(noQuotaNow)},
			tau:  tauWithLimits(t, "max_queue_time: 1h"), phase: taugridv1.PhaseQueued, message: "queued", requeue: 40 * time.Minute},
		"queued for days with no max_queue_time: it waits, no deadline to look again at": {
			objs:  []client.Object{enteredAgo(taugridv1.PhaseQueued, 72*time.Hour), job(builders.MakeJob("r1-1", ns)), pendingWorkloadOf(noQuotaNow)},
			phase: taugridv1.PhaseQueued, message: "queued"},
		"a queue that can never hold the run fails it at once, whatever its max_queue_time": {
			objs: []client.Object{enteredAgo(taugridv1.PhaseQueued, time.Minute), job(builders.MakeJob("r1-1", ns)), pendingWorkloadOf(noRDMA)},
			tau:  tauWithLimits(t, "max_queue_time: 1h"), phase: taugridv1.PhaseFailed,
			message: "cannot run: queue runs offers no rdma/ib; ask for a profile that has it", stalled: "True/Failed",
			events: []string{"Warning Failed"}, gone: []client.Object{job(builders.MakeJob("r1-1", ns)), pendingWorkloadOf("")}},
		"admitted 15m ago, no pod running: failed at the 10m start deadline, its quota released": {
			objs:  []client.Object{enteredAgo(taugridv1.PhaseAdmitted, 15*time.Minute), admitted, workloadOf(true)},
			phase: taugridv1.PhaseFailed, message: "failed (Infrastructure): not running within the platform's start deadline: its pods did not start",
			events: []string{"Warning Failed"}, gone: []client.Object{admitted, workloadOf(true)}},
		"admitted 15m ago, its image never pulled: failed ImagePull, the pod deleted": {
			objs:  []client.Object{enteredAgo(taugridv1.PhaseAdmitted, 15*time.Minute), admitted, workloadOf(true), pulling},
			phase: taugridv1.PhaseFailed, message: "failed (ImagePull): not running within the platform's start deadline: ImagePullBackOff: Back-off pulling image",
			events: []string{"Warning Failed"}, gone: []client.Object{admitted, workloadOf(true), pulling}},
		"admitted 4m ago, no pod running yet: looked at again when the start deadline falls due": {
			objs:  []client.Object{enteredAgo(taugridv1.PhaseAdmitted, 4*time.Minute), admitted, workloadOf(true)},
			phase: taugridv1.PhaseAdmitted, message: "", requeue: 6 * time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, nil, tc.objs...)
			if tc.tau != nil {
				w.files.files["tau.yaml"] = tc.tau
			}
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if got.Status.Phase != tc.phase || !strings.HasPrefix(got.Status.Message, tc.message) {
				t.Errorf("phase %q %q, want %q %q...", got.Status.Phase, got.Status.Message, tc.phase, tc.message)
			}
			if c := condition(got, taugridv1.ConditionStalled); c != tc.stalled {
				t.Errorf("Stalled %q, want %q", c, tc.stalled)
			}
			failed := tc.phase == taugridv1.PhaseFailed
			if c := condition(got, taugridv1.ConditionReady); failed && c != "False/Failed" {
				t.Errorf("Ready %q, want False/Failed", c)
			}
			if a := lastAttempt(t, got); (a.EndTime != nil) != failed {
				t.Errorf("the attempt's end time %v; the attempt ended: %v", a.EndTime, failed)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			if diff := cmp.Diff(tc.events, w.reasons()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, o := range tc.gone {
				if w.holds(t, o) {
					t.Errorf("%T %s is still there", o, o.GetName())
				}
			}
			if !failed && len(w.jobs(t)) != 1 {
				t.Errorf("%d Jobs, want the waiting attempt's kept", len(w.jobs(t)))
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d, want %d", got.Status.ObservedGeneration, got.Generation)
			}
		})
	}
}
