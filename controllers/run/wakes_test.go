package run

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The updates a run's objects see in a cluster (their order on a real Job
// controller, Kueue and kubelet: hack/scale), and which of them wake the
// run.
func TestOnlyAnUpdateThatChangesWhatTheRunReadsWakesIt(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r-1", ResourceVersion: "10",
		Finalizers: []string{"batch.kubernetes.io/job-tracking"}}, Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r-1-0-abcde", ResourceVersion: "11",
		Finalizers: []string{"batch.kubernetes.io/job-tracking"}}, Spec: corev1.PodSpec{NodeName: "gpu-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-r-1-abcde", ResourceVersion: "12"}}

	cases := []struct {
		name   string
		old    client.Object
		change func(client.Object)
		wakes  bool
	}{
		{"Kueue unsuspends the Job", job, func(o client.Object) { o.(*batchv1.Job).Spec.Suspend = ptr.To(false) }, true},
		{"the Job controller counts a pod active and starts the clock", job, func(o client.Object) {
			j := o.(*batchv1.Job)
			j.Status.Active, j.Status.StartTime = 1, &at
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse, LastTransitionTime: at}}
		}, false},
		{"the Job's pod is ready", job, func(o client.Object) { o.(*batchv1.Job).Status.Ready = ptr.To[int32](1) }, false},
		{"the Job's pod ended and is counted", job, func(o client.Object) {
			j := o.(*batchv1.Job)
			j.Status.Active, j.Status.Terminating = 0, ptr.To[int32](0)
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"u"}}
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: at}}
		}, false},
		{"the Job completes", job, func(o client.Object) {
			j := o.(*batchv1.Job)
			j.Status.Succeeded, j.Status.CompletionTime = 1, &at
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: at}}
		}, true},
		{"the Job fails", job, func(o client.Object) {
			o.(*batchv1.Job).Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
		}, true},
		{"the Job is being deleted", job, func(o client.Object) { o.SetDeletionTimestamp(&at) }, true},
		{"someone labels the Job", job, func(o client.Object) { o.SetLabels(map[string]string{"x": "y"}) }, true},
		{"the Job controller lets the pod go", pod, func(o client.Object) { o.SetFinalizers(nil) }, false},
		{"the pod ends", pod, func(o client.Object) { o.(*corev1.Pod).Status.Phase = corev1.PodSucceeded }, true},
		{"the pod is being deleted", pod, func(o client.Object) { o.SetDeletionTimestamp(&at) }, true},
		{"Kueue marks the Workload in use", wl, func(o client.Object) { o.SetFinalizers([]string{"kueue.x-k8s.io/resource-in-use"}) }, false},
		{"Kueue admits the Workload", wl, func(o client.Object) {
			o.(*kueue.Workload).Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue}}
		}, true},
		{"an admission check's state moves", wl, func(o client.Object) {
			o.(*kueue.Workload).Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "taugrid-policy", State: kueue.CheckStateReady}}
		}, true},
	}
	p := ChangesWhatARunReads()
	for _, c := range cases {
		cur := c.old.DeepCopyObject().(client.Object)
		c.change(cur)
		cur.SetResourceVersion(c.old.GetResourceVersion() + "1") // every update is a new version
		if got := p.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: cur}); got != c.wakes {
			t.Errorf("%s: wakes the run %v, want %v", c.name, got, c.wakes)
		}
	}
	if !p.Create(event.CreateEvent{Object: pod}) || !p.Delete(event.DeleteEvent{Object: pod}) {
		t.Error("a pod's creation or deletion does not wake its run")
	}
	if job.Status.Conditions != nil || job.ResourceVersion != "10" || len(pod.Finalizers) != 1 {
		t.Error("the predicate changed the cache's objects")
	}
}
