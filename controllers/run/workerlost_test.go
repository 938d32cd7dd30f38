package run

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// workerLostWorkload is a dispatched Workload as Kueue v0.17 leaves it
// once MultiKueue lost its worker: evicted for its admission check, its
// cluster cleared, the check reset to Pending.
func workerLostWorkload() *kueue.Workload {
	return &kueue.Workload{Status: kueue.WorkloadStatus{
		Conditions: []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending"},
			{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByAdmissionCheck, Message: "At least one admission check is false"}},
		AdmissionChecks: []kueue.AdmissionCheckState{{Name: "tau-dispatch-a", State: kueue.CheckStatePending, Message: "Reset to Pending after eviction. Previously: Retry"}},
		SchedulingStats: &kueue.SchedulingStats{Evictions: []kueue.WorkloadSchedulingStatsEviction{{Reason: kueue.WorkloadEvictedByAdmissionCheck, Count: 1}}},
	}}
}

// dispatchedRun is a run whose current attempt was dispatched to cluster.
func dispatchedRun(cluster string) *taugridv1.TauRun {
	return &taugridv1.TauRun{Status: taugridv1.TauRunStatus{
		Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: "r-1", Cluster: cluster},
		Attempts: []taugridv1.Attempt{{Cluster: cluster}},
	}}
}

// The Workload tells a lost worker from a run that still runs there, from
// one Kueue readmitted elsewhere (only its stats remember), and from a run
// on the local cluster, which has no worker to lose.
func TestAWorkloadTakenOffItsWorkerNamesTheWorkerLost(t *testing.T) {
	readmitted := workerLostWorkload()
	readmitted.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: "QuotaReserved"}}
	readmitted.Status.ClusterName = ptr.To("west")
	stillThere := admittedWorkload()
	stillThere.Status.ClusterName = ptr.To("east")
	preempted := evictedWorkload()
	for name, tc := range map[string]struct {
		run  *taugridv1.TauRun
		wl   *kueue.Workload
		want string
	}{
		"evicted for its check, no cluster named":  {dispatchedRun("east"), workerLostWorkload(), "east"},
		"already readmitted on the other worker":   {dispatchedRun("east"), readmitted, "east"},
		"still admitted on its worker":             {dispatchedRun("east"), stillThere, ""},
		"preempted in the manager, not lost":       {dispatchedRun("east"), preempted, ""},
		"a local run has no worker to lose":        {dispatchedRun(""), workerLostWorkload(), ""},
		"no Workload yet":                          {dispatchedRun("east"), nil, ""},
		"readmitted on the same worker it was on":  {dispatchedRun("west"), readmitted, ""},
		"a run not submitted yet has no attempt":   {&taugridv1.TauRun{}, workerLostWorkload(), ""},
		"evicted for its check while on a worker?": {dispatchedRun("east"), func() *kueue.Workload { w := workerLostWorkload(); w.Status.ClusterName = ptr.To("east"); return w }(), ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := lostWorker(tc.run, tc.wl); got != tc.want {
				t.Errorf("lostWorker = %q, want %q", got, tc.want)
			}
		})
	}
}

// A worker loss is recorded before anything acts on it, and the record
// decides every later look, whatever the cache shows; a preemption and a
// success still win.
func TestDecideAttemptEndForALostWorker(t *testing.T) {
	for name, tc := range map[string]struct {
		v    AttemptView
		want AttemptEnd
	}{
		"a loss seen for the first time is recorded first": {AttemptView{Workload: workerLostWorkload(), LostWorker: "east"}, AttemptRecordWorkerLoss},
		"a recorded loss ends the attempt":                 {AttemptView{WorkerLossRecorded: true, Workload: workerLostWorkload()}, AttemptWorkerLost},
		"even with the job gone":                           {AttemptView{WorkerLossRecorded: true, Gone: true}, AttemptWorkerLost},
		"even with a stale Workload that looks admitted":   {AttemptView{WorkerLossRecorded: true, Workload: admittedWorkload()}, AttemptWorkerLost},
		"a recorded preemption comes first":                {AttemptView{Recorded: &taugridv1.Preemption{}, WorkerLossRecorded: true}, AttemptPreempted},
		"a job that succeeded succeeded":                   {AttemptView{Succeeded: true, LostWorker: "east"}, AttemptGoesOn},
	} {
		t.Run(name, func(t *testing.T) {
			if got := DecideAttemptEnd(tc.v); got != tc.want {
				t.Errorf("DecideAttemptEnd = %s, want %s", got, tc.want)
			}
		})
	}
}

// A run whose worker does not answer says which worker and why, in the
// client's words without the request, and never more.
func TestAnUnreachableWorkerIsNamedWithoutTheRequest(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://10.0.0.7:6443/api/v1/namespaces/a/pods?labelSelector=taugrid.dev%2Frun%3Dr", Err: syscall.ECONNREFUSED}
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"refused":   {refused, "cannot reach worker cluster east to follow the run: connection refused; its phase is as last seen"},
		"timed out": {fmt.Errorf("listing pods: %w", context.DeadlineExceeded), "cannot reach worker cluster east to follow the run: its API did not answer in time; its phase is as last seen"},
		"other":     {errors.New(`worker cluster east: multikueueclusters.kueue.x-k8s.io "east" not found`), `multikueueclusters.kueue.x-k8s.io "east" not found`},
	} {
		t.Run(name, func(t *testing.T) {
			got := unreachableMessage("east", tc.err)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "labelSelector") {
				t.Errorf("unreachableMessage = %q, want it to say %q and not quote the request", got, tc.want)
			}
		})
	}
}

// A dispatched run holding quota is looked at every WorkerResync whatever
// else falls due, since nothing watches its worker's pods; a local one is
// resynced only when nothing else is due.
func TestADispatchedRunIsLookedAtAgainSoonWhateverElseIsDue(t *testing.T) {
	local := &taugridv1.TauRun{Status: taugridv1.TauRunStatus{Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: "r-1"}}}
	for name, tc := range map[string]struct {
		run   *taugridv1.TauRun
		phase taugridv1.RunPhase
		due   time.Duration
		want  time.Duration
	}{
		"dispatched, admitted, its start deadline in 6m":       {dispatchedRun("east"), taugridv1.PhaseAdmitted, 6 * time.Minute, WorkerResync},
		"dispatched, running, its GPUs read again in a minute": {dispatchedRun("east"), taugridv1.PhaseRunning, time.Minute, WorkerResync},
		"dispatched, admitted, nothing else due":               {dispatchedRun("east"), taugridv1.PhaseAdmitted, 0, WorkerResync},
		"dispatched, due sooner than the resync":               {dispatchedRun("east"), taugridv1.PhaseAdmitted, time.Second, time.Second},
		"local, admitted, its start deadline in 6m":            {local, taugridv1.PhaseAdmitted, 6 * time.Minute, 6 * time.Minute},
		"local, running, nothing else due: the safety net":     {local, taugridv1.PhaseRunning, 0, progressResync},
		"dispatched, queued: only what is due":                 {dispatchedRun("east"), taugridv1.PhaseQueued, 15 * time.Second, 15 * time.Second},
		"dispatched, succeeded: nothing":                       {dispatchedRun("east"), taugridv1.PhaseSucceeded, 0, 0},
	} {
		if got := recheckFor(tc.run, tc.phase, tc.due); got != tc.want {
			t.Errorf("%s: looked at again after %s, want %s", name, got, tc.want)
		}
	}
}
