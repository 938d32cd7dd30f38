package builders

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobBuilder builds a batch Job of one container, as a run's attempt.
type JobBuilder struct{ job batchv1.Job }

// MakeJob starts a suspended Job of queue "runs" with one busybox
// container.
func MakeJob(name, namespace string) *JobBuilder {
	suspend := true
	return &JobBuilder{job: batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{render.LabelQueueName: "runs"}},
		Spec: batchv1.JobSpec{Suspend: &suspend, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}}}}}}}
}

// Unsuspended lets the Job run, as Kueue does on admission.
func (b *JobBuilder) Unsuspended() *JobBuilder {
	suspend := false
	b.job.Spec.Suspend = &suspend
	return b
}

// Running records one active, ready pod, as the Job controller does once
// it started.
func (b *JobBuilder) Running() *JobBuilder {
	ready := int32(1)
	b.job.Status.Active, b.job.Status.Ready, b.job.Status.StartTime = 1, &ready, &metav1.Time{}
	return b
}

// Condition adds a Job condition (Complete, Failed, ...).
func (b *JobBuilder) Condition(t batchv1.JobConditionType, reason, msg string) *JobBuilder {
	b.job.Status.Conditions = append(b.job.Status.Conditions,
		batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg})
	return b
}

// Obj is the Job built.
func (b *JobBuilder) Obj() *batchv1.Job { return b.job.DeepCopy() }

// RayJobBuilder builds a KubeRay RayJob with a head and no workers.
type RayJobBuilder struct{ rj rayv1.RayJob }

// MakeRayJob starts a suspended RayJob of queue "runs" running entrypoint.
func MakeRayJob(name, namespace, entrypoint string) *RayJobBuilder {
	return &RayJobBuilder{rj: rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{render.LabelQueueName: "runs"}},
		Spec: rayv1.RayJobSpec{Entrypoint: entrypoint, Suspend: true, RayClusterSpec: &rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray"}}}}}}}}}
}

// Workers adds a worker group of replicas.
func (b *RayJobBuilder) Workers(replicas int32) *RayJobBuilder {
	b.rj.Spec.RayClusterSpec.WorkerGroupSpecs = append(b.rj.Spec.RayClusterSpec.WorkerGroupSpecs,
		rayv1.WorkerGroupSpec{GroupName: "workers", Replicas: &replicas})
	return b
}

// Status sets the job and deployment status KubeRay reports.
func (b *RayJobBuilder) Status(job rayv1.JobStatus, deployment rayv1.JobDeploymentStatus, msg string) *RayJobBuilder {
	b.rj.Status.JobStatus, b.rj.Status.JobDeploymentStatus, b.rj.Status.Message = job, deployment, msg
	return b
}

// Obj is the RayJob built.
func (b *RayJobBuilder) Obj() *rayv1.RayJob { return b.rj.DeepCopy() }
