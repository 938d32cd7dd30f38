package reconciler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
		{Type: gpuHealthyCondition, Status: gpuHealthy, Message: msg}}}}
}

func TestClassifyFailure(t *testing.T) {
	healthy := map[string]*corev1.Node{"gpu-1": node("gpu-1", corev1.ConditionTrue, "")}
	type result struct {
		Class  FailureClass
		Reason string
	}
	tests := map[string]struct {
		e    FailureEvidence
		want result
	}{
		"a non-zero exit on a healthy node is the user's": {
			e:    FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-1", exited(3, "Error"))}, Nodes: healthy},
			want: result{FailureUserError, "container main exited with code 3"},
		},
		"the same exit on a GPU that went unhealthy is a GPU fault": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-1", exited(1, "Error"))},
				Nodes: map[string]*corev1.Node{"gpu-1": node("gpu-1", corev1.ConditionFalse, "GPU 3 (GPU-7f...): XID 79, fallen off the bus")}},
			want: result{FailureGPUFault, "node gpu-1: GPU 3 (GPU-7f...): XID 79, fallen off the bus"},
		},
		"an OOM kill": {
			e:    FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-1", exited(137, "OOMKilled"))}, Nodes: healthy},
			want: result{FailureOOMKilled, "container main ran out of memory"},
		},
		"Kueue preempted the workload": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Workload: &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
				{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a higher priority Workload"}}}}},
			want: result{FailurePreempted, "evicted by Kueue: Preempted to accommodate a higher priority Workload"},
		},
		"the time limit": {
			e:    FailureEvidence{Job: failedJob(batchv1.JobReasonDeadlineExceeded)},
			want: result{FailureTimeout, "ran past its time limit"},
		},
		"a node that is gone": {
			e:    FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Pods: []corev1.Pod{podOn("gpu-9", exited(137, "Error"))}, Nodes: healthy},
			want: result{FailureNodeLost, "node gpu-9 is gone"},
		},
		"an evicted pod": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Nodes: healthy, Pods: []corev1.Pod{podOn("gpu-1", func(p *corev1.Pod) {
				p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: ephemeral-storage."
			})}},
			want: result{FailureNodeLost, "pod run-1-abcde: Evicted: The node was low on resource: ephemeral-storage."},
		},
		"an image that cannot be pulled": {
			e: FailureEvidence{Job: failedJob("BackoffLimitExceeded"), Nodes: healthy, Pods: []corev1.Pod{podOn("gpu-1", func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "ImagePullBackOff", Message: `Back-off pulling image "python:3.99"`}}}}
			})}},
			want: result{FailureImagePull, `ImagePullBackOff: Back-off pulling image "python:3.99"`},
		},
		"nothing recorded is infrastructure, with the raw reason": {
			e:    FailureEvidence{Job: failedJob("PodFailurePolicy")},
			want: result{FailureInfrastructure, "PodFailurePolicy: Job has reached the specified backoff limit"},
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
