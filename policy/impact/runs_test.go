package impact

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// workload is a Kueue Workload of count pods, each asking gpus H200s.
func workload(count int32, gpus int64) *kueue.Workload {
	pod := corev1.PodSpec{
		NodeSelector:   map[string]string{h200: "NVIDIA-H200"},
		InitContainers: []corev1.Container{{Name: "source", Image: "ghcr.io/taugrid/tau-source:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("100m")}}}},
		Containers: []corev1.Container{{Name: "main", Image: "nvcr.io/nvidia/pytorch:24.05-py3", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": resource.MustParse("12")},
			Limits:   corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
		}}},
	}
	return &kueue.Workload{Spec: kueue.WorkloadSpec{
		QueueName:        "runs",
		PriorityClassRef: &kueue.PriorityClassRef{Group: "kueue.x-k8s.io", Kind: "WorkloadPriorityClass", Name: "tau-high"},
		PodSets:          []kueue.PodSet{{Name: "main", Count: count, Template: corev1.PodTemplateSpec{Spec: pod}}},
	}}
}

func TestRunOfReadsTheWorkloadAndFindsTheProfile(t *testing.T) {
	pol := load(t, "policy", examplePlatform(t, nil))
	run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "team-a"},
		Spec:   taugridv1.TauRunSpec{Repository: "llm"},
		Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseRunning, Workload: &taugridv1.WorkloadStatus{Queue: "runs", Admitted: true}}}
	cases := map[string]struct {
		wl       *kueue.Workload
		profiles []string
		gpus     int64
	}{
		"two nodes of eight GPUs are only h200-8's":           {wl: workload(2, 8), profiles: []string{"h200-8"}, gpus: 16},
		"one GPU fits either GPU profile team-a has":          {wl: workload(1, 1), profiles: []string{"h200-1", "h200-8"}, gpus: 1},
		"a run not submitted yet is known by its TauRun only": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := RunOf(run, tc.wl, pol.Policy)
			if diff := cmp.Diff(tc.profiles, got.Profiles); diff != "" {
				t.Errorf("profiles (-want +got):\n%s", diff)
			}
			if got.GPUs != tc.gpus || got.Submitted != (tc.wl != nil) || !got.Admitted || got.Queue != "runs" {
				t.Errorf("RunOf = %+v", got)
			}
			if tc.wl == nil {
				return
			}
			if got.PriorityClass != "tau-high" || len(got.Images) != 1 {
				t.Errorf("priority %q, images %v", got.PriorityClass, got.Images)
			}
			if cpu := got.Requests["cpu"]; cpu.Cmp(resource.MustParse("12")) < 0 {
				t.Errorf("cpu = %s", cpu.String())
			}
		})
	}
}
