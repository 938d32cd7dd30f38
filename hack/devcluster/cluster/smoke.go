package cluster

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/test/controlplane"
)

// SmokeNamespace and SmokeQueue are where Smoke submits: a tenant of
// examples/platform/kueue.
const (
	SmokeNamespace = "team-a"
	SmokeQueue     = "runs"
)

// JobTimes is how long a Job took, from just before its creation, to be admitted
// (unsuspended by Kueue) and to complete.
type JobTimes struct {
	Admitted, Completed time.Duration
}

// Smoke submits a suspended 1-GPU Job to the team-a queue, as TauGrid would, and
// waits until Kueue admits it and it completes on a fake node. It returns the
// time to completion and deletes the Job.
func (c *Cluster) Smoke(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return 0, err
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: controlplane.NewScheme()})
	if err != nil {
		return 0, err
	}
	times, err := RunJob(ctx, cl, timeout)
	return times.Completed, err
}

// smokeJob is a trivial suspended Job asking for one GPU in the smoke queue.
func smokeJob() *batchv1.Job {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("1")}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "smoke-", Namespace: SmokeNamespace,
			Labels: map[string]string{"kueue.x-k8s.io/queue-name": SmokeQueue},
		},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: "busybox", Command: []string{"true"},
					Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				}},
			}},
		},
	}
}

// RunJob creates a smoke Job, watches it to completion and deletes it.
func RunJob(ctx context.Context, cl client.WithWatch, timeout time.Duration) (JobTimes, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	job := smokeJob()
	start := time.Now()
	if err := cl.Create(ctx, job); err != nil {
		return JobTimes{}, fmt.Errorf("creating the smoke Job: %w", err)
	}
	defer func() {
		_ = cl.Delete(context.WithoutCancel(ctx), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}()
	w, err := cl.Watch(ctx, &batchv1.JobList{}, client.InNamespace(job.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", job.Name)})
	if err != nil {
		return JobTimes{}, err
	}
	defer w.Stop()
	var times JobTimes
	last := job
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return times, fmt.Errorf("watch of Job %s/%s closed", job.Namespace, job.Name)
			}
			j, isJob := ev.Object.(*batchv1.Job)
			if !isJob {
				continue
			}
			last = j
			if times.Admitted == 0 && j.Spec.Suspend != nil && !*j.Spec.Suspend {
				times.Admitted = time.Since(start)
			}
			if jobCondition(j, batchv1.JobComplete) {
				times.Completed = time.Since(start)
				return times, nil
			}
			if jobCondition(j, batchv1.JobFailed) {
				return times, fmt.Errorf("job %s/%s failed: %+v", j.Namespace, j.Name, j.Status.Conditions)
			}
		case <-ctx.Done():
			return times, fmt.Errorf("job %s/%s not complete after %s (suspended=%v, status %+v): see the kueue and kwok logs",
				last.Namespace, last.Name, timeout, ptr.Deref(last.Spec.Suspend, false), last.Status)
		}
	}
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
