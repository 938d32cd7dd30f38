package run

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Builders for failed attempts.

func failedJob(reason string) *batchv1.Job {
	return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: "Job has reached the specified backoff limit"}}}}
}

func podOn(node string, mutate ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run-1-abcde"}, Spec: corev1.PodSpec{NodeName: node}}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func exited(code int32, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}})
	}
}

func node(name string, gpuHealthy corev1.ConditionStatus, msg string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: taugridv1.ConditionGPUHealthy, Status: gpuHealthy, Message: msg}}}}
}

func TestClassifyFailure(t *testing.T) {
	healthy := map[string]*corev1.Node{"gpu-1": node("gpu-1", corev1.ConditionTrue, "")}
	type result struct {
		Class  taugridv1.FailureClass
		Reason string
	}
	tests := map[string]struct {
		e    FailureEvidence
		want result
	}{
		"a non-zero exit on a healthy node is the user's": {
			e:    FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-1", exited(3, "Error"))}, Nodes: healthy},
			want: result{taugridv1.FailureUserError, "container main exited with code 3"},
		},
		"the same exit on a GPU that went unhealthy is a GPU fault": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-1", exited(1, "Error"))},
				Nodes: map[string]*corev1.Node{"gpu-1": node("gpu-1", corev1.ConditionFalse, "GPU 3 (GPU-7f...): XID 79, fallen off the bus")}},
			want: result{taugridv1.FailureGPUFault, "node gpu-1: GPU 3 (GPU-7f...): XID 79, fallen off the bus"},
		},
		"an OOM kill": {
			e:    FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-1", exited(137, "OOMKilled"))}, Nodes: healthy},
			want: result{taugridv1.FailureOOMKilled, "container main ran out of memory"},
		},
		"Kueue preempted the workload": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Workload: &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
				{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a higher priority Workload"}}}}},
			want: result{taugridv1.FailurePreempted, "evicted by Kueue: Preempted to accommodate a higher priority Workload"},
		},
		"the time limit": {
			e:    FailureEvidence{Job: failedJob(batchv1.JobReasonDeadlineExceeded)},
			want: result{taugridv1.FailureTimeout, "ran past its time limit"},
		},
		"a node that is gone": {
			e:    FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-9", exited(137, "Error"))}, Nodes: healthy},
			want: result{taugridv1.FailureNodeLost, "node gpu-9 is gone"},
		},
		"an evicted pod": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Nodes: healthy, Pods: []corev1.Pod{podOn("gpu-1", func(p *corev1.Pod) {
				p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: ephemeral-storage."
			})}},
			want: result{taugridv1.FailureNodeLost, "pod run-1-abcde: Evicted: The node was low on resource: ephemeral-storage."},
		},
		"an image that cannot be pulled": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Nodes: healthy, Pods: []corev1.Pod{podOn("gpu-1", func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "ImagePullBackOff", Message: `Back-off pulling image "python:3.99"`}}}}
			})}},
			want: result{taugridv1.FailureImagePull, `ImagePullBackOff: Back-off pulling image "python:3.99"`},
		},
		"nothing recorded is infrastructure, with the raw reason": {
			e:    FailureEvidence{Job: failedJob("PodFailurePolicy")},
			want: result{taugridv1.FailureInfrastructure, "PodFailurePolicy: Job has reached the specified backoff limit"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			class, reason := ClassifyFailure(tc.e)
			if diff := cmp.Diff(tc.want, result{class, reason}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Builders for a preempted attempt's Workload, as Kueue shows it over time.

func admittedWorkload() *kueue.Workload {
	return &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"},
		{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"}}}}
}

const preemptedMsg = "Preempted to accommodate a workload (UID: u1, JobUID: j1) due to prioritization in the ClusterQueue"

// evictedWorkload is the Workload just after Kueue preempted it.
func evictedWorkload() *kueue.Workload {
	return &kueue.Workload{Status: kueue.WorkloadStatus{
		Conditions: []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending"},
			{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption, Message: preemptedMsg},
			{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: kueue.InClusterQueueReason, Message: preemptedMsg}},
		SchedulingStats: &kueue.SchedulingStats{Evictions: []kueue.WorkloadSchedulingStatsEviction{{Reason: kueue.WorkloadEvictedByPreemption, Count: 1}}},
	}}
}

// readmittedWorkload is the same Workload once Kueue admitted it again,
// which resets its Evicted and Preempted conditions; only its scheduling
// stats remember.
func readmittedWorkload() *kueue.Workload {
	wl := admittedWorkload()
	wl.Status.Conditions = append(wl.Status.Conditions,
		metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: "QuotaReserved", Message: "Previously: " + preemptedMsg},
		metav1.Condition{Type: kueue.WorkloadPreempted, Status: metav1.ConditionFalse, Reason: "QuotaReserved", Message: "Previously: " + preemptedMsg})
	wl.Status.SchedulingStats = &kueue.SchedulingStats{Evictions: []kueue.WorkloadSchedulingStatsEviction{{Reason: kueue.WorkloadEvictedByPreemption, Count: 1}}}
	return wl
}

func TestDecideAttemptEnd(t *testing.T) {
	recorded := &taugridv1.Preemption{Message: preemptedMsg}
	tests := map[string]struct {
		v    AttemptView
		want AttemptEnd
	}{
		"an admitted workload goes on":                                 {AttemptView{Workload: admittedWorkload()}, AttemptGoesOn},
		"a workload Kueue has not made yet goes on":                    {AttemptView{}, AttemptGoesOn},
		"a preemption seen for the first time is recorded first":       {AttemptView{Workload: evictedWorkload()}, AttemptRecordPreemption},
		"so is one Kueue already readmitted, from its stats":           {AttemptView{Workload: readmittedWorkload()}, AttemptRecordPreemption},
		"a job gone with its Workload still evicted: record it":        {AttemptView{Gone: true, Workload: evictedWorkload()}, AttemptRecordPreemption},
		"a recorded preemption ends the attempt":                       {AttemptView{Recorded: recorded, Workload: evictedWorkload()}, AttemptPreempted},
		"even with the job and its Workload seen gone":                 {AttemptView{Recorded: recorded, Gone: true}, AttemptPreempted},
		"even with a stale Workload that still looks admitted":         {AttemptView{Recorded: recorded, Workload: admittedWorkload()}, AttemptPreempted},
		"even with the job gone and a Workload that still looks fine":  {AttemptView{Recorded: recorded, Gone: true, Workload: admittedWorkload()}, AttemptPreempted},
		"a job gone with nothing recorded or shown was deleted":        {AttemptView{Gone: true}, AttemptDeleted},
		"a job gone whose Workload never saw a preemption was deleted": {AttemptView{Gone: true, Workload: admittedWorkload()}, AttemptDeleted},
		"a job that succeeded succeeded":                               {AttemptView{Recorded: recorded, Succeeded: true, Workload: evictedWorkload()}, AttemptGoesOn},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := DecideAttemptEnd(tc.v); got != tc.want {
				t.Errorf("DecideAttemptEnd = %s, want %s", got, tc.want)
			}
		})
	}
}

// preemptionWorld is one moment of a preempted attempt as the cluster and
// one reconcile see it. Every object has a sequence of versions; the
// cluster holds the latest, and a reconcile reads each through a cache
// that may lag it, independently, but never goes back.
type preemptionWorld struct {
	run, runSeen int // 0: no record, 1: preemption recorded, 2: attempt ended (retrying)
	job, jobSeen int // 0: exists, 1: deleted
	wl, wlSeen   int // 0: admitted, 1: evicted, 2: readmitted by Kueue, 3: deleted
	preempted    int // how many reconciles ended the attempt as Preempted
	deleted      int // how many called it deleted
}

var workloadVersions = []func() *kueue.Workload{admittedWorkload, evictedWorkload, readmittedWorkload, func() *kueue.Workload { return nil }}

// reconcile is one look by the run reconciler, as reconcileProgress makes
// it: decide from what it reads, check the run against the API server
// before acting on a missing job or a recorded preemption, record or act.
func (w preemptionWorld) reconcile() preemptionWorld {
	if w.runSeen == 2 {
		return w // the attempt is over: no Workload to follow
	}
	var recorded *taugridv1.Preemption
	if w.runSeen == 1 {
		recorded = &taugridv1.Preemption{Message: preemptedMsg}
	}
	switch DecideAttemptEnd(AttemptView{Recorded: recorded, Gone: w.jobSeen == 1, Workload: workloadVersions[w.wlSeen]()}) {
	case AttemptRecordPreemption:
		w.run = max(w.run, 1)
	case AttemptPreempted:
		if w.runSeen != w.run {
			return w // stale: look again
		}
		w.run, w.job, w.wl = 2, 1, 3 // the attempt ends; TauGrid deletes its job and Workload
		w.preempted++
	case AttemptDeleted:
		if w.runSeen != w.run {
			return w
		}
		w.deleted++
		w.run = 2
	}
	return w
}

// next is every state one step away: Kueue readmits, a cache catches up,
// or the reconciler looks.
func (w preemptionWorld) next() []preemptionWorld {
	var out []preemptionWorld
	if w.wl == 1 {
		readmitted := w
		readmitted.wl = 2
		out = append(out, readmitted)
	}
	for _, step := range []func(*preemptionWorld) bool{
		func(s *preemptionWorld) bool { s.runSeen++; return s.runSeen <= s.run },
		func(s *preemptionWorld) bool { s.jobSeen++; return s.jobSeen <= s.job },
		func(s *preemptionWorld) bool { s.wlSeen++; return s.wlSeen <= s.wl },
	} {
		if s := w; step(&s) {
			out = append(out, s)
		}
	}
	return append(out, w.reconcile())
}

// Every interleaving of Kueue's eviction (and readmission), TauGrid's
// deletions and what each cache shows when: the attempt ends Preempted
// exactly once, and is never called deleted.
func TestAPreemptedAttemptEndsPreemptedWhateverTheOrderSeen(t *testing.T) {
	start := preemptionWorld{wl: 1} // Kueue has just preempted; every cache still shows the attempt admitted
	seen := map[preemptionWorld]bool{start: true}
	queue := []preemptionWorld{start}
	ends := 0
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		if w.deleted > 0 || w.preempted > 1 {
			t.Fatalf("reached %+v: the attempt was called deleted or ended twice", w)
		}
		next := w.next()
		if len(slices.DeleteFunc(slices.Clone(next), func(n preemptionWorld) bool { return n == w })) == 0 {
			ends++ // nothing can change any more
			if w.preempted != 1 {
				t.Errorf("an interleaving ends at %+v, without the attempt ended as Preempted", w)
			}
		}
		for _, n := range next {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	if ends == 0 {
		t.Fatal("no interleaving ends")
	}
	t.Logf("%d states reached, %d final", len(seen), ends)
}

func TestARecordedPreemptionClassifiesTheAttemptWhateverTheWorkloadShows(t *testing.T) {
	rec := &taugridv1.Preemption{Message: preemptedMsg}
	for name, wl := range map[string]*kueue.Workload{"gone": nil, "admitted (stale)": admittedWorkload(), "readmitted": readmittedWorkload()} {
		class, reason := ClassifyFailure(FailureEvidence{Workload: wl, Preemption: rec, Job: failedJob("BackoffLimitExceeded")})
		if class != taugridv1.FailurePreempted || reason != "evicted by Kueue: "+preemptedMsg {
			t.Errorf("workload %s: %s %q, want Preempted with Kueue's message", name, class, reason)
		}
	}
	if got := PreemptionOf(readmittedWorkload(), time.Time{}); got == nil || got.Message != "Previously: "+preemptedMsg {
		t.Errorf("preemptionOf(readmitted) = %+v, want a record with Kueue's message", got)
	}
	if got := PreemptionOf(admittedWorkload(), time.Time{}); got != nil {
		t.Errorf("preemptionOf(admitted) = %+v, want none", got)
	}
}
