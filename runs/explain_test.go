package runs

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// waitingWorkload is a Workload as Kueue v0.17 leaves it while it waits.
func waitingWorkload(reserved metav1.ConditionStatus, msg string) *kueue.Workload {
	b := builders.MakeWorkload("job-r-1-abc", "team-a")
	if reserved != "" {
		b.QuotaReserved(reserved, msg)
	}
	return b.Obj()
}

// teamQueue is team-a's ClusterQueue of h200 GPUs, in cohort research.
func teamQueue(nominal, borrowLimit, used, borrowed string) *kueue.ClusterQueue {
	return builders.MakeClusterQueue("team-a").Cohort("research").Quota("h200", "nvidia.com/gpu", nominal, borrowLimit).
		Reserved("h200", "nvidia.com/gpu", used, borrowed).Obj()
}

func TestEveryWaitIsExplainedInOneLine(t *testing.T) {
	quota := "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 8 more needed"
	for name, tc := range map[string]struct {
		wl    *kueue.Workload
		q     QueueState
		kind  WaitKind
		short string
	}{
		"no workload yet": {nil, QueueState{}, WaitUnseen, "waiting for Kueue to see the workload"},
		"not looked at yet": {waitingWorkload("", ""), QueueState{ClusterQueue: teamQueue("8", "8", "0", "0"), Position: 2, Pending: 5},
			WaitQueued, "queued #2 of 5 in team-a"},
		"not enough quota": {waitingWorkload(metav1.ConditionFalse, quota), QueueState{ClusterQueue: teamQueue("8", "0", "8", "0"), Position: 1, Pending: 1},
			WaitQuota, "queued #1 of 1 in team-a: needs 8 more nvidia.com/gpu (h200); team-a uses 8/8 (no borrowing)"},
		"with an estimate": {waitingWorkload(metav1.ConditionFalse, quota), QueueState{ClusterQueue: teamQueue("8", "0", "8", "0"), Position: 1, Pending: 1,
			FreesBy: time.Date(2026, 11, 30, 14, 20, 0, 0, time.UTC), FreedBy: "team-a/run r-1"},
			WaitQuota, "queued #1 of 1 in team-a: needs 8 more nvidia.com/gpu (h200); team-a uses 8/8 (no borrowing); frees by 14:20 UTC"},
		"with a start estimate": {waitingWorkload(metav1.ConditionFalse, quota), QueueState{ClusterQueue: teamQueue("8", "0", "8", "0"), Position: 3, Pending: 5,
			FreesBy: time.Date(2026, 11, 30, 14, 20, 0, 0, time.UTC), FreedBy: "team-a/run r-1",
			StartsAt: time.Date(2026, 11, 30, 16, 5, 0, 0, time.UTC), Now: time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)},
			WaitQuota, "queued #3 of 5 in team-a: needs 8 more nvidia.com/gpu (h200); team-a uses 8/8 (no borrowing); starts about 16:05 UTC"},
		"not looked at yet, starting tomorrow": {waitingWorkload("", ""), QueueState{ClusterQueue: teamQueue("8", "8", "0", "0"), Position: 9, Pending: 9,
			StartsAt: time.Date(2026, 12, 1, 16, 5, 0, 0, time.UTC), Now: time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)},
			WaitQueued, "queued #9 of 9 in team-a; starts about Tue 16:05 UTC"},
		"borrowing": {waitingWorkload(metav1.ConditionFalse, quota), QueueState{ClusterQueue: teamQueue("8", "8", "16", "8"), Position: 3, Pending: 4},
			WaitQuota, "queued #3 of 4 in team-a: needs 8 more nvidia.com/gpu (h200); team-a uses 16/8 (8 borrowed)"},
		"preemption in progress": {waitingWorkload(metav1.ConditionFalse, quota+". Pending the preemption of 2 workload(s)"), QueueState{},
			WaitPreemption, "freeing 8 nvidia.com/gpu: preempting 2 lower-priority workload(s); starts when they stop"},
		"more than the queue can ever hold": {waitingWorkload(metav1.ConditionFalse,
			"couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h200, previously considered podsets requests (0) + current podset request (24) > maximum capacity (16)"),
			QueueState{ClusterQueue: teamQueue("8", "8", "0", "0")}, WaitInfeasible, "cannot run: asks 24 nvidia.com/gpu, team-a can hold at most 16 (flavor h200)"},
		"a resource the queue lacks": {waitingWorkload(metav1.ConditionFalse, "couldn't assign flavors to pod set main: resource rdma/ib unavailable in ClusterQueue"),
			QueueState{ClusterQueue: teamQueue("8", "8", "0", "0")}, WaitInfeasible, "cannot run: team-a offers no rdma/ib; ask for a profile that has it"},
		"a stopped queue": {waitingWorkload(metav1.ConditionFalse, "ClusterQueue team-a is inactive"), QueueState{ClusterQueue: teamQueue("8", "8", "0", "0")},
			WaitStopped, "team-a is paused by the platform; the run starts when it reopens"},
	} {
		t.Run(name, func(t *testing.T) {
			ex := ExplainWait(tc.wl, tc.q)
			if ex.Kind != tc.kind || ex.Short != tc.short {
				t.Errorf("got %s %q, want %s %q", ex.Kind, ex.Short, tc.kind, tc.short)
			}
			if utf8.RuneCountInString(ex.Short) > maxShortExplanation || strings.Contains(ex.Short, "\n") {
				t.Errorf("the short line does not fit a commit status: %q", ex.Short)
			}
			if tc.wl != nil && len(tc.wl.Status.Conditions) > 0 && !strings.Contains(ex.Long, "Kueue: "+tc.wl.Status.Conditions[0].Message) {
				t.Errorf("the long explanation lacks Kueue's own words:\n%s", ex.Long)
			}
		})
	}
}

func TestAdmissionChecksAreNamed(t *testing.T) {
	wl := waitingWorkload(metav1.ConditionTrue, "Quota reserved in ClusterQueue team-a")
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "provisioning", State: kueue.CheckStatePending}, {Name: "budget", State: kueue.CheckStateReady}}
	ex := ExplainWait(wl, QueueState{ClusterQueue: teamQueue("8", "8", "8", "0")})
	if want := "quota reserved in team-a; waiting for admission checks: provisioning"; ex.Kind != WaitAdmissionChecks || ex.Short != want {
		t.Errorf("got %s %q, want %q", ex.Kind, ex.Short, want)
	}
	// Every check passed: the wait is Kueue's admission, not a check.
	wl.Status.AdmissionChecks[0].State = kueue.CheckStateReady
	ex = ExplainWait(wl, QueueState{ClusterQueue: teamQueue("8", "8", "8", "0")})
	if want := "quota reserved in team-a; admission checks passed, waiting for Kueue to admit it"; ex.Kind != WaitAdmissionChecks || ex.Short != want {
		t.Errorf("got %s %q, want %q", ex.Kind, ex.Short, want)
	}
}

// TestARejectedAdmissionCheckCannotRun: Kueue never admits a workload a
// check rejected; the run says so in the check's words, and ends.
func TestARejectedAdmissionCheckCannotRun(t *testing.T) {
	wl := waitingWorkload(metav1.ConditionFalse, "")
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{
		{Name: "taugrid-policy-default", State: kueue.CheckStateRejected, Message: "TauGrid policy: Job r-1 changed after TauGrid rendered it: spec.parallelism"},
		{Name: "provisioning", State: kueue.CheckStateRejected}}
	ex := ExplainWait(wl, QueueState{ClusterQueue: teamQueue("8", "8", "8", "0")})
	if want := "cannot run: TauGrid policy: Job r-1 changed after TauGrid rendered it: spec.parallelism"; ex.Kind != WaitInfeasible || ex.Short != want {
		t.Errorf("got %s %q, want %q", ex.Kind, ex.Short, want)
	}
	wl.Status.AdmissionChecks = wl.Status.AdmissionChecks[1:]
	if ex := ExplainWait(wl, QueueState{}); ex.Short != "cannot run: admission check provisioning refused it" {
		t.Errorf("a silent rejection reads %q", ex.Short)
	}
	// Once Kueue deactivated it, the checks are Pending again; TauGrid's
	// refusal is kept on the workload.
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "taugrid-policy-default", State: kueue.CheckStatePending, Message: "Reset to Pending after eviction. Previously: Rejected"}}
	wl.Annotations = map[string]string{taugridv1.AnnotationAdmissionRefusal: "TauGrid policy: created outside TauGrid: Job x belongs to no TauGrid run"}
	if ex := ExplainWait(wl, QueueState{}); ex.Kind != WaitInfeasible || ex.Short != "cannot run: TauGrid policy: created outside TauGrid: Job x belongs to no TauGrid run" {
		t.Errorf("a deactivated workload reads %s %q", ex.Kind, ex.Short)
	}
}

func TestAVeryLongReasonIsCutToACommitStatus(t *testing.T) {
	ex := ExplainWait(waitingWorkload(metav1.ConditionFalse, strings.Repeat("word ", 80)), QueueState{})
	if n := utf8.RuneCountInString(ex.Short); n > maxShortExplanation {
		t.Errorf("%d characters", n)
	}
}
