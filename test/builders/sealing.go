package builders

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// PolicyAt records, in status, the policy commit the run was rendered under.
func (b *TauRunBuilder) PolicyAt(commit string) *TauRunBuilder {
	b.run.Status.PolicyCommit = commit
	return b
}

// JobUID sets the Job's UID, which Kueue's Workload names in a label.
func (b *JobBuilder) JobUID(uid string) *JobBuilder {
	b.job.UID = types.UID(uid)
	return b
}

// RenderedUnder annotates the Job with the policy commit it was rendered
// under, as the run reconciler does.
func (b *JobBuilder) RenderedUnder(policyCommit string) *JobBuilder {
	if b.job.Annotations == nil {
		b.job.Annotations = map[string]string{}
	}
	b.job.Annotations[render.AnnotationPolicyCommit] = policyCommit
	return b
}

// kueueJobUID is the label Kueue puts on a Workload: its job's UID.
const kueueJobUID = "kueue.x-k8s.io/job-uid"

// OwnedByJob makes the Workload Kueue's for job: controlled by it and
// labelled with its UID.
func (b *WorkloadBuilder) OwnedByJob(job *batchv1.Job) *WorkloadBuilder {
	if b.wl.Labels == nil {
		b.wl.Labels = map[string]string{}
	}
	b.wl.Labels[kueueJobUID] = string(job.UID)
	b.wl.OwnerReferences = append(b.wl.OwnerReferences, *metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job")))
	return b
}

// AdmittedTo records the admission to cq with flavor for res of podSet.
func (b *WorkloadBuilder) AdmittedTo(cq, podSet string, res corev1.ResourceName, flavor string) *WorkloadBuilder {
	b.wl.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq),
		PodSetAssignments: []kueue.PodSetAssignment{{Name: kueue.PodSetReference(podSet),
			Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{res: kueue.ResourceFlavorReference(flavor)}}}}
	return b
}

// WorkloadCondition adds a condition that last changed at t.
func (b *WorkloadBuilder) WorkloadCondition(t string, s metav1.ConditionStatus, reason, msg string, at time.Time) *WorkloadBuilder {
	b.wl.Status.Conditions = append(b.wl.Status.Conditions,
		metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(at)})
	return b
}

// EnvFromSecretKey gives the main container env from key of Secret secret.
func (b *AttemptPodBuilder) EnvFromSecretKey(env, secret, key string) *AttemptPodBuilder {
	c := &b.pod.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}})
	return b
}

// ExitMessage gives the terminated main container (Exited) a reason and
// termination message, and its start and end.
func (b *AttemptPodBuilder) ExitMessage(reason, msg string, start, end time.Time) *AttemptPodBuilder {
	t := b.pod.Status.ContainerStatuses[0].State.Terminated
	t.Reason, t.Message, t.StartedAt, t.FinishedAt = reason, msg, metav1.NewTime(start), metav1.NewTime(end)
	return b
}

// SourceFetched gives the pod TauGrid's source init container
// (render.SourceContainer), terminated with code and termination
// message msg.
func (b *AttemptPodBuilder) SourceFetched(code int32, msg string) *AttemptPodBuilder {
	b.pod.Spec.InitContainers = []corev1.Container{{Name: render.SourceContainer, Image: "ghcr.io/taugrid/tau"}}
	b.pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: render.SourceContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}
	return b
}

// GPUHealthSince sets the node agent's GPUHealthy condition, last changed
// at since.
func (b *GPUNodeBuilder) GPUHealthSince(s corev1.ConditionStatus, reason, msg string, since time.Time) *GPUNodeBuilder {
	b.node.Status.Conditions = append(b.node.Status.Conditions, corev1.NodeCondition{Type: taugridv1.ConditionGPUHealthy,
		Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(since)})
	return b
}

// MakeEventAbout is a core Event name about object kind/name, of type
// typ and reason, saying msg, last seen at t.
func MakeEventAbout(name, namespace, kind, object, typ, reason, msg string, t time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: object, Namespace: namespace},
		Type:           typ, Reason: reason, Message: msg, Count: 1, LastTimestamp: metav1.NewTime(t)}
}
