package builders

import (
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation sets an annotation on the run (a resume request, ...).
func (b *TauRunBuilder) Annotation(key, value string) *TauRunBuilder {
	if b.run.Annotations == nil {
		b.run.Annotations = map[string]string{}
	}
	b.run.Annotations[key] = value
	return b
}

// Entered records that the run entered phase at t (status.phases), as the
// reconciler stamps it; the deadlines count from there.
func (b *TauRunBuilder) Entered(phase taugridv1.RunPhase, t time.Time) *TauRunBuilder {
	b.run.Status.Phases = append(b.run.Status.Phases, taugridv1.PhaseTransition{Phase: phase, Time: metav1.NewTime(t)})
	return b
}

// Preempted records Kueue's preemption, with its message, on the last
// attempt, as the reconciler does before it ends the attempt.
func (b *TauRunBuilder) Preempted(msg string, at time.Time) *TauRunBuilder {
	a := &b.run.Status.Attempts[len(b.run.Status.Attempts)-1]
	a.Preemption = &taugridv1.Preemption{Time: metav1.NewTime(at), Message: msg}
	return b
}

// ResumeHandled records the resume request the run last handled.
func (b *TauRunBuilder) ResumeHandled(v string) *TauRunBuilder {
	b.run.Status.LastHandledResume = v
	return b
}

// KeptFor says, as render does, how many seconds the ended RayJob is kept
// for the record.
func (b *RayJobBuilder) KeptFor(seconds int) *RayJobBuilder {
	if b.rj.Annotations == nil {
		b.rj.Annotations = map[string]string{}
	}
	b.rj.Annotations[render.AnnotationKeepAfterFinished] = strconv.Itoa(seconds)
	return b
}

// EndedAt sets the time KubeRay says the job ended.
func (b *RayJobBuilder) EndedAt(t time.Time) *RayJobBuilder {
	b.rj.Status.EndTime = &metav1.Time{Time: t}
	return b
}

// AttemptPodBuilder builds a pod of one attempt of a run, labelled as
// render labels them.
type AttemptPodBuilder struct{ pod corev1.Pod }

// MakeAttemptPod starts a Pending pod of the run's attempt with one
// container, "main".
func MakeAttemptPod(name, namespace, run string, attempt int) *AttemptPodBuilder {
	return &AttemptPodBuilder{pod: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{render.LabelRun: run, render.LabelAttempt: strconv.Itoa(attempt)}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}}
}

// OnNode schedules the pod on node.
func (b *AttemptPodBuilder) OnNode(node string) *AttemptPodBuilder {
	b.pod.Spec.NodeName = node
	return b
}

// GPUs makes the container ask for n nvidia.com/gpu.
func (b *AttemptPodBuilder) GPUs(n int64) *AttemptPodBuilder {
	b.pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	return b
}

// Running has the pod's container running.
func (b *AttemptPodBuilder) Running() *AttemptPodBuilder {
	b.pod.Status.Phase = corev1.PodRunning
	b.pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return b
}

// Exited has the pod's container terminated with code; the pod failed
// unless code is 0.
func (b *AttemptPodBuilder) Exited(code int32) *AttemptPodBuilder {
	b.pod.Status.Phase = corev1.PodFailed
	if code == 0 {
		b.pod.Status.Phase = corev1.PodSucceeded
	}
	b.pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	return b
}

// Waiting has the pod's container waiting for reason (ImagePullBackOff, ...).
func (b *AttemptPodBuilder) Waiting(reason, msg string) *AttemptPodBuilder {
	b.pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	return b
}

// Finalizer holds the pod once deleted, as a pod in its termination
// grace is.
func (b *AttemptPodBuilder) Finalizer(f string) *AttemptPodBuilder {
	b.pod.Finalizers = append(b.pod.Finalizers, f)
	return b
}

// Obj is the pod built.
func (b *AttemptPodBuilder) Obj() *corev1.Pod { return b.pod.DeepCopy() }

// GPUNodeBuilder builds a node whose GPUs the node agent reports on.
type GPUNodeBuilder struct{ node corev1.Node }

// MakeGPUNode starts a Ready node.
func MakeGPUNode(name string) *GPUNodeBuilder {
	return &GPUNodeBuilder{node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
}

// GPUUnhealthy sets the node agent's GPUHealthy condition to False with msg
// (an XID, ...).
func (b *GPUNodeBuilder) GPUUnhealthy(msg string) *GPUNodeBuilder {
	b.node.Status.Conditions = append(b.node.Status.Conditions, corev1.NodeCondition{
		Type: corev1.NodeConditionType(taugridv1.ConditionGPUHealthy), Status: corev1.ConditionFalse, Reason: "XID", Message: msg})
	return b
}

// Obj is the node built.
func (b *GPUNodeBuilder) Obj() *corev1.Node { return b.node.DeepCopy() }

// RayClusterBuilder builds the Ray cluster KubeRay makes for an attempt's
// RayJob, labelled as render labels the RayJob.
type RayClusterBuilder struct{ rc rayv1.RayCluster }

// MakeRayCluster starts a Ray cluster of the run's attempt.
func MakeRayCluster(name, namespace, run string, attempt int) *RayClusterBuilder {
	return &RayClusterBuilder{rc: rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
		Labels: map[string]string{render.LabelRun: run, render.LabelAttempt: strconv.Itoa(attempt)}}}}
}

// Obj is the Ray cluster built.
func (b *RayClusterBuilder) Obj() *rayv1.RayCluster { return b.rc.DeepCopy() }
