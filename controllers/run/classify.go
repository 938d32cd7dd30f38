package run

import (
	"fmt"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// FailureEvidence is what the cluster shows about a failed attempt.
type FailureEvidence struct {
	Job      *batchv1.Job
	Pods     []corev1.Pod
	Workload *kueue.Workload
	// Preemption is the preemption recorded on the attempt: it decides,
	// whatever the Workload shows by the time the attempt is classified.
	Preemption *taugridv1.Preemption
	// Nodes the attempt's pods ran on, by name; a missing entry means the
	// node is gone.
	Nodes map[string]*corev1.Node
}

// ClassifyFailure names the class of a failed attempt and a short reason.
// It is pure, and checks the platform's faults before blaming the
// researcher: a pod that exited 1 on a GPU that just threw an XID is a GPU
// fault, not a user error.
func ClassifyFailure(e FailureEvidence) (taugridv1.FailureClass, string) {
	for _, check := range []func(FailureEvidence) (taugridv1.FailureClass, string, bool){
		preempted, timedOut, gpuFault, nodeLost, oomKilled, imagePull, userError,
	} {
		if class, reason, ok := check(e); ok {
			return class, reason
		}
	}
	return taugridv1.FailureInfrastructure, rawReason(e)
}

func preempted(e FailureEvidence) (taugridv1.FailureClass, string, bool) {
	if e.Preemption != nil {
		if e.Preemption.Message == "" {
			return taugridv1.FailurePreempted, "preempted by Kueue", true
		}
		return taugridv1.FailurePreempted, "evicted by Kueue: " + e.Preemption.Message, true
	}
	if e.Workload == nil {
		return "", "", false
	}
	for _, t := range []string{kueue.WorkloadPreempted, kueue.WorkloadEvicted} {
		if c := meta.FindStatusCondition(e.Workload.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			return taugridv1.FailurePreempted, "evicted by Kueue: " + c.Message, true
		}
	}
	return "", "", false
}

func timedOut(e FailureEvidence) (taugridv1.FailureClass, string, bool) {
	if c := jobFailed(e.Job); c != nil && c.Reason == batchv1.JobReasonDeadlineExceeded {
		return taugridv1.FailureTimeout, "ran past its time limit", true
	}
	return "", "", false
}

func gpuFault(e FailureEvidence) (taugridv1.FailureClass, string, bool) {
	for _, p := range e.Pods {
		n := e.Nodes[p.Spec.NodeName]
		if n == nil {
			continue
		}
		for _, c := range n.Status.Conditions {
			if string(c.Type) == taugridv1.ConditionGPUHealthy && c.Status == corev1.ConditionFalse {
				return taugridv1.FailureGPUFault, fmt.Sprintf("node %s: %s", n.Name, c.Message), true
			}
		}
	}
	return "", "", false
}

func nodeLost(e FailureEvidence) (taugridv1.FailureClass, string, bool) {
	for _, p := range e.Pods {
		if p.Spec.NodeName != "" && e.Nodes != nil && e.Nodes[p.Spec.NodeName] == nil {
			return taugridv1.FailureNodeLost, "node " + p.Spec.NodeName + " is gone", true
		}
		if p.Status.Reason == "Evicted" || p.Status.Reason == "NodeLost" {
			return taugridv1.FailureNodeLost, fmt.Sprintf("pod %s: %s: %s", p.Name, p.Status.Reason, p.Status.Message), true
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
				return taugridv1.FailureNodeLost, fmt.Sprintf("pod %s disrupted: %s", p.Name, c.Message), true
			}
		}
	}
	return "", "", false
}

func oomKilled(e FailureEvidence) (taugridv1.FailureClass, string, bool) {
	for _, p := range e.Pods {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
				return taugridv1.FailureOOMKilled, fmt.Sprintf("container %s ran out of memory", cs.Name), true
			}
		}
	}
	return "", "", false
}

func imagePull(e FailureEvidence) (taugridv1.FailureClass, string, bool) {
	for _, p := range e.Pods {
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
					return taugridv1.FailureImagePull, fmt.Sprintf("%s: %s", w.Reason, w.Message), true
				}
			}
		}
	}
	return "", "", false
}

func userError(e FailureEvidence) (taugridv1.FailureClass, string, bool) {
	for _, p := range e.Pods {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return taugridv1.FailureUserError, fmt.Sprintf("container %s exited with code %d", cs.Name, t.ExitCode), true
			}
		}
	}
	return "", "", false
}

func jobFailed(j *batchv1.Job) *batchv1.JobCondition {
	if j == nil {
		return nil
	}
	for i, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func rawReason(e FailureEvidence) string {
	if c := jobFailed(e.Job); c != nil {
		return strings.TrimSpace(c.Reason + ": " + c.Message)
	}
	return "failed for a reason the cluster did not record"
}
