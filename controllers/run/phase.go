package run

import (
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Observed is what the cluster says about a run's current attempt: its
// workload (a Job or a RayJob, exactly one set), the Kueue Workload for it,
// if Kueue has made one yet, and the attempt's pods. Pods and Nodes are the
// cache's own objects: read them, never change them.
type Observed struct {
	Job      *batchv1.Job
	RayJob   *rayv1.RayJob
	Workload *kueue.Workload
	Pods     []corev1.Pod
	// Nodes are the cluster's nodes, read only when a pod is
	// unschedulable, to tell "no node could ever" from "no room now".
	Nodes []corev1.Node
	// Cluster is the MultiKueue worker the attempt was dispatched to, whose
	// pods and nodes these are; "" for the local cluster.
	Cluster string
	// WorkerErr is why the worker's pods could not be read: Pods and
	// Nodes then say nothing.
	WorkerErr error
}

// Progress is a run's phase as derived from the cluster, with a one-line
// explanation.
type Progress struct {
	Phase    taugridv1.RunPhase
	Message  string
	Admitted bool
	Held     bool // admitted, and something keeps its pods from starting
}

// DeriveProgress decides a run's phase from its workload and Kueue's
// Workload. It is pure: the reconciler feeds it what it read.
func DeriveProgress(o Observed) Progress {
	if p, done := finished(o); done {
		return p
	}
	admitted := o.Workload != nil && meta.IsStatusConditionTrue(o.Workload.Status.Conditions, kueue.WorkloadAdmitted)
	if !admitted {
		return Progress{Phase: taugridv1.PhaseQueued, Message: queuedMessage(o.Workload)}
	}
	if running(o) {
		return Progress{Phase: taugridv1.PhaseRunning, Message: "running", Admitted: true}
	}
	msg, held := startingMessage(o)
	return Progress{Phase: taugridv1.PhaseAdmitted, Message: msg, Admitted: true, Held: held}
}

// Advance keeps a run from going back from Running to Admitted: between its
// pods ending and the Job's verdict, a running run looks merely admitted.
// Going back to Queued stays possible, as an evicted workload does.
func Advance(current taugridv1.RunPhase, currentMsg string, p Progress) Progress {
	if p.Phase == taugridv1.PhaseAdmitted && current == taugridv1.PhaseRunning {
		p.Phase, p.Message = taugridv1.PhaseRunning, currentMsg
	}
	return p
}

// finished reports a workload that has ended, successfully or not.
func finished(o Observed) (Progress, bool) {
	switch {
	case o.Job != nil:
		for _, c := range o.Job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return Progress{Phase: taugridv1.PhaseSucceeded, Message: "succeeded", Admitted: true}, true
			case batchv1.JobFailed:
				return Progress{Phase: taugridv1.PhaseFailed, Message: jobFailure(c), Admitted: true}, true
			}
		}
	case o.RayJob != nil:
		st := o.RayJob.Status
		switch {
		case st.JobStatus == rayv1.JobStatusSucceeded || (st.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete && st.JobStatus != rayv1.JobStatusFailed):
			return Progress{Phase: taugridv1.PhaseSucceeded, Message: "succeeded", Admitted: true}, true
		case st.JobStatus == rayv1.JobStatusFailed || st.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed ||
			st.JobDeploymentStatus == rayv1.JobDeploymentStatusValidationFailed:
			msg := "Ray job failed"
			if st.Message != "" {
				msg += ": " + st.Message
			}
			return Progress{Phase: taugridv1.PhaseFailed, Message: msg, Admitted: true}, true
		}
	}
	return Progress{}, false
}

func jobFailure(c batchv1.JobCondition) string {
	if c.Message != "" {
		return fmt.Sprintf("failed: %s (%s)", c.Message, c.Reason)
	}
	return "failed: " + c.Reason
}

func suspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

// queuedMessage is Kueue's reason for holding a workload, or a plain
// placeholder while Kueue has not looked at it yet.
func queuedMessage(wl *kueue.Workload) string {
	if wl == nil {
		return "waiting for Kueue to see the workload"
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue && c.Message != "" {
		return c.Message
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
		return c.Message
	}
	return "queued in " + string(wl.Spec.QueueName)
}
