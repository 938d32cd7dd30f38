package render

import (
	"slices"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestTheLabelsDigestIsTheLabelsAlone: a Fingerprint's Labels is what
// LabelsDigest gives for the same labels (the admission check compares the
// one recorded at creation with the other, taken of a cached copy that has
// no pod templates); a label changed, added or removed moves it, a change
// of the spec does not, and the Digest moves with both.
func TestTheLabelsDigestIsTheLabelsAlone(t *testing.T) {
	job := func() *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "r1-1", Labels: map[string]string{LabelQueueName: "runs", LabelPriorityClass: "tau-normal"}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "registry.example.com/train:1"}}}}}}
	}
	base, err := FingerprintOf(job())
	if err != nil {
		t.Fatal(err)
	}
	if base.Labels != LabelsDigest(job().Labels) || len(base.Labels) != len("sha256:")+64 {
		t.Fatalf("Labels %q, LabelsDigest %q: want the same SHA-256", base.Labels, LabelsDigest(job().Labels))
	}
	cases := map[string]struct {
		change      func(*batchv1.Job)
		labelsMoves bool
	}{
		"a label changed":         {func(j *batchv1.Job) { j.Labels[LabelQueueName] = "other-team" }, true},
		"a label added":           {func(j *batchv1.Job) { j.Labels["x"] = "" }, true},
		"a label removed":         {func(j *batchv1.Job) { delete(j.Labels, LabelPriorityClass) }, true},
		"the image changed":       {func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "evil/miner" }, false},
		"the parallelism changed": {func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](64) }, false},
	}
	for name, tc := range cases {
		j := job()
		tc.change(j)
		fp, err := FingerprintOf(j)
		if err != nil {
			t.Fatal(err)
		}
		if moved := fp.Labels != base.Labels; moved != tc.labelsMoves || fp.Labels != LabelsDigest(j.Labels) {
			t.Errorf("%s: the labels' digest moved %v, want %v (LabelsDigest agrees: %v)", name, moved, tc.labelsMoves, fp.Labels == LabelsDigest(j.Labels))
		}
		if fp.Digest == base.Digest {
			t.Errorf("%s: the Digest did not move", name)
		}
	}
	j := job()
	j.Spec.Suspend = ptr.To(false) // Kueue's to write
	if fp, _ := FingerprintOf(j); fp.Digest != base.Digest || fp.Labels != base.Labels {
		t.Errorf("resuming the Job moved its fingerprint")
	}
}

// TestChangedSinceNamesWhatChangedAddedAndRemoved: from the short digests
// a run records (20 hex digits a field), the fields that differ are named
// by path: a value changed, a field added, and a field removed from the
// spec, a pod template, a container or the labels TauGrid and Kueue write;
// a removed field of no such kind is counted. A recorded string that is
// not a Short names nothing.
func TestChangedSinceNamesWhatChangedAddedAndRemoved(t *testing.T) {
	job := func() *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "r1-1", Labels: map[string]string{LabelQueueName: "runs", "team.example.com/cost-center": "42"}},
			Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](3600), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "registry.example.com/train:1",
					SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}}}}}}}
	}
	base, err := FingerprintOf(job())
	if err != nil {
		t.Fatal(err)
	}
	recorded := base.Short()
	if len(recorded) != 20*len(base.Fields) {
		t.Fatalf("Short is %d hex digits for %d fields, want 20 a field", len(recorded), len(base.Fields))
	}
	cases := map[string]struct {
		change func(*batchv1.Job)
		want   []string
	}{
		"unchanged": {func(*batchv1.Job) {}, nil},
		"the image changed": {func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "evil/miner" },
			[]string{"spec.template.spec.containers[main].image"}},
		"privilege added": {func(j *batchv1.Job) { j.Spec.Template.Spec.HostNetwork = true },
			[]string{"spec.template.spec.hostNetwork"}},
		"the container's security context removed": {func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].SecurityContext = nil },
			[]string{"spec.template.spec.containers[main].securityContext (removed)"}},
		"the deadline removed": {func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = nil },
			[]string{"spec.activeDeadlineSeconds (removed)"}},
		"the queue label removed": {func(j *batchv1.Job) { delete(j.Labels, LabelQueueName) },
			[]string{"metadata.labels[" + LabelQueueName + "] (removed)"}},
		"a label of no known kind removed": {func(j *batchv1.Job) { delete(j.Labels, "team.example.com/cost-center") },
			[]string{"1 other field removed"}},
	}
	for name, tc := range cases {
		j := job()
		tc.change(j)
		now, err := FingerprintOf(j)
		if err != nil {
			t.Fatal(err)
		}
		if got := ChangedSince(recorded, now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: named %q, want %q", name, got, tc.want)
		}
	}
	now, _ := FingerprintOf(job())
	if got := ChangedSince(recorded[:len(recorded)-1], now); got != nil {
		t.Errorf("a recorded string cut short named %q", got)
	}
}

// TestChangedSinceNamesARemovedFieldOfARayJobsWorkerGroup: a RayJob's pod
// templates are its head's and each worker group's, named by group.
func TestChangedSinceNamesARemovedFieldOfARayJobsWorkerGroup(t *testing.T) {
	newRayJob := func() *rayv1.RayJob {
		ctr := func() []corev1.Container {
			return []corev1.Container{{Name: "ray", Image: "rayproject/ray:2.9", SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}}}
		}
		return &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "r1-1", Labels: map[string]string{LabelQueueName: "runs"}},
			Spec: rayv1.RayJobSpec{Entrypoint: "python train.py", RayClusterSpec: &rayv1.RayClusterSpec{
				HeadGroupSpec:    rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: ctr()}}},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "gpu", Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: ctr()}}}},
			}}}
	}
	base, err := FingerprintOf(newRayJob())
	if err != nil {
		t.Fatal(err)
	}
	rj := newRayJob()
	rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].SecurityContext = nil
	rj.Spec.Entrypoint = "python mine.py"
	now, err := FingerprintOf(rj)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"spec.entrypoint", "spec.rayClusterSpec.workerGroupSpecs[gpu].template.spec.containers[ray].securityContext (removed)"}
	if got := ChangedSince(base.Short(), now); !slices.Equal(got, want) {
		t.Errorf("named %q, want %q", got, want)
	}
}
