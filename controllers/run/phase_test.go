package run

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The objects DeriveProgress reads, from test/builders.

func suspendedJob() *batchv1.Job { return builders.MakeJob("job", "team-a").Obj() }

func runningJob() *batchv1.Job {
	return builders.MakeJob("job", "team-a").Unsuspended().Running().Obj()
}

func finishedJob(t batchv1.JobConditionType, reason, msg string) *batchv1.Job {
	return builders.MakeJob("job", "team-a").Unsuspended().Running().Condition(t, reason, msg).Obj()
}

// runningPod is a pod whose container runs; role is its Ray node type, if any.
func runningPod(name, role string) corev1.Pod {
	p := gpuPod(name, role)
	p.Spec.NodeName = "gpu-1"
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "main", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	return p
}

// unschedulablePod is a Pending pod the scheduler found no node for.
func unschedulablePod(name, role, why string) corev1.Pod {
	p := gpuPod(name, role)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: why}}}
	return p
}

func gpuPod(name, role string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi")}}}}}}
	if role != "" {
		p.Labels[RayNodeType] = role
	}
	return p
}

// rayJobWith is a RayJob Kueue has started (unsuspended), in KubeRay's
// deployment status st.
func rayJobWith(workers int32, st rayv1.JobDeploymentStatus) *rayv1.RayJob {
	rj := builders.MakeRayJob("rj", "team-a", "python train.py").Workers(workers).Status("", st, "").Obj()
	rj.Spec.Suspend = false
	return rj
}

func workload(conds ...metav1.Condition) *kueue.Workload {
	wl := &kueue.Workload{Spec: kueue.WorkloadSpec{QueueName: "runs"}}
	wl.Status.Conditions = conds
	return wl
}

func cond(t string, s metav1.ConditionStatus, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Message: msg}
}

func TestDeriveProgress(t *testing.T) {
	const noQuota = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 1 more needed"
	tests := map[string]struct {
		obs  Observed
		want Progress
	}{
		"a Job Kueue has not seen yet is queued": {
			obs:  Observed{Job: suspendedJob()},
			want: Progress{Phase: taugridv1.PhaseQueued, Message: "waiting for Kueue to see the workload"},
		},
		"a Job waiting for quota shows Kueue's reason": {
			obs:  Observed{Job: suspendedJob(), Workload: workload(cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, noQuota))},
			want: Progress{Phase: taugridv1.PhaseQueued, Message: noQuota},
		},
		"an evicted Job is queued again with the eviction reason": {
			obs: Observed{Job: suspendedJob(), Workload: workload(
				cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "Preempted to accommodate a higher priority Workload"),
				cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, noQuota))},
			want: Progress{Phase: taugridv1.PhaseQueued, Message: "Preempted to accommodate a higher priority Workload"},
		},
		"an admitted Job whose pods have not been created is admitted": {
			obs:  Observed{Job: &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(false)}}, Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, ""))},
			want: Progress{Phase: taugridv1.PhaseAdmitted, Message: "admitted; the Job is creating its pods (0 of 1)", Admitted: true},
		},
		"an admitted Job Kueue has not unsuspended yet says so": {
			obs:  Observed{Job: suspendedJob(), Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, ""))},
			want: Progress{Phase: taugridv1.PhaseAdmitted, Message: "admitted; waiting for Kueue to start the Job (still suspended)", Admitted: true},
		},
		"an admitted RayJob Kueue has not unsuspended yet says so": {
			obs:  Observed{RayJob: &rayv1.RayJob{Spec: rayv1.RayJobSpec{Suspend: true}}, Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, ""))},
			want: Progress{Phase: taugridv1.PhaseAdmitted, Message: "admitted; waiting for Kueue to start the RayJob (still suspended)", Admitted: true},
		},
		"an admitted Job with a running pod is running": {
			obs:  Observed{Job: runningJob(), Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "")), Pods: []corev1.Pod{runningPod("j-0", "")}},
			want: Progress{Phase: taugridv1.PhaseRunning, Message: "running", Admitted: true},
		},
		"an admitted Job whose active pod is Pending is not running": {
			obs: Observed{Job: runningJob(), Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "")),
				Pods: []corev1.Pod{unschedulablePod("j-0", "", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")}},
			want: Progress{Phase: taugridv1.PhaseAdmitted, Admitted: true, Held: true,
				Message: "admitted, not starting: no node fits the pod: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu; pod j-0 needs 8 nvidia.com/gpu, 16 cpu, 128Gi memory"},
		},
		"a complete Job succeeded": {
			obs:  Observed{Job: finishedJob(batchv1.JobComplete, "", ""), Workload: workload(cond(kueue.WorkloadFinished, metav1.ConditionTrue, ""))},
			want: Progress{Phase: taugridv1.PhaseSucceeded, Message: "succeeded", Admitted: true},
		},
		"a failed Job failed with its reason": {
			obs:  Observed{Job: finishedJob(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")},
			want: Progress{Phase: taugridv1.PhaseFailed, Message: "failed: Job has reached the specified backoff limit (BackoffLimitExceeded)", Admitted: true},
		},
		"a Job past its deadline failed": {
			obs:  Observed{Job: finishedJob(batchv1.JobFailed, "DeadlineExceeded", "")},
			want: Progress{Phase: taugridv1.PhaseFailed, Message: "failed: DeadlineExceeded", Admitted: true},
		},
		"a RayJob whose Ray job runs on its head and every worker is running": {
			obs: Observed{RayJob: rayJobWith(2, rayv1.JobDeploymentStatusRunning), Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "")),
				Pods: []corev1.Pod{runningPod("r-head", "head"), runningPod("r-w1", "worker"), runningPod("r-w2", "worker")}},
			want: Progress{Phase: taugridv1.PhaseRunning, Message: "running", Admitted: true},
		},
		"a RayJob KubeRay calls running while a worker fits no node is not running": {
			obs: Observed{RayJob: rayJobWith(2, rayv1.JobDeploymentStatusRunning), Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "")),
				Pods: []corev1.Pod{runningPod("r-head", "head"), runningPod("r-w1", "worker"),
					unschedulablePod("r-w2", "worker", "0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu, 2 Insufficient memory.")}},
			want: Progress{Phase: taugridv1.PhaseAdmitted, Admitted: true, Held: true,
				Message: "admitted, not starting: no node fits a Ray worker: 0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu, 2 Insufficient memory; pod r-w2 needs 8 nvidia.com/gpu, 16 cpu, 128Gi memory"},
		},
		"a RayJob whose Ray job succeeded succeeded": {
			obs:  Observed{RayJob: builders.MakeRayJob("rj", "team-a", "python train.py").Status(rayv1.JobStatusSucceeded, rayv1.JobDeploymentStatusComplete, "").Obj()},
			want: Progress{Phase: taugridv1.PhaseSucceeded, Message: "succeeded", Admitted: true},
		},
		"a RayJob whose Ray job failed failed with Ray's message": {
			obs:  Observed{RayJob: builders.MakeRayJob("rj", "team-a", "python train.py").Status(rayv1.JobStatusFailed, rayv1.JobDeploymentStatusComplete, "exit code 1").Obj()},
			want: Progress{Phase: taugridv1.PhaseFailed, Message: "Ray job failed: exit code 1", Admitted: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DeriveProgress(tc.obs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdvanceNeverGoesBackFromRunningToAdmitted(t *testing.T) {
	admitted := Progress{Phase: taugridv1.PhaseAdmitted, Message: "admitted by Kueue; starting pods", Admitted: true}
	queued := Progress{Phase: taugridv1.PhaseQueued, Message: "Preempted to accommodate a higher priority Workload"}
	tests := map[string]struct {
		current taugridv1.RunPhase
		next    Progress
		want    Progress
	}{
		"a running run whose pods just ended stays running": {taugridv1.PhaseRunning, admitted, Progress{Phase: taugridv1.PhaseRunning, Message: "running", Admitted: true}},
		"a queued run is admitted":                          {taugridv1.PhaseQueued, admitted, admitted},
		"an evicted running run is queued again":            {taugridv1.PhaseRunning, queued, queued},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Advance(tc.current, "running", tc.next)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
