package platform

import (
	"context"
	"fmt"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/policy/impact"
)

// The preview of one platform pull request at the scale harness's size:
// 1,000 repositories, 10,000 runs that have not ended (half of them
// queued with a Kueue Workload of one H200 GPU, half running), 1,000
// nodes. Each poll reads the cluster once (impact.Read, from the cache:
// here the fake client, which copies each object it lists as the
// informer cache does) and computes each open pull request's preview
// (impact.Compute); the pull request halves team-b's GPUs and takes
// h200-1 from team-a, so every team-a run is judged.
func BenchmarkPreviewingAPlatformPullRequestAtScale(b *testing.B) {
	const repos, runs, nodes = 1000, 10000, 1000
	var objs []client.Object
	for i := range repos {
		ns := []string{"team-a", "team-b"}[i%2]
		objs = append(objs, builders.MakeTauRepository(fmt.Sprintf("repo-%04d", i), ns, fmt.Sprintf("https://git.example.com/%s/repo-%04d", ns, i)).Obj())
	}
	for i := range runs {
		ns := []string{"team-a", "team-b"}[i%2]
		name := fmt.Sprintf("run-%05d", i)
		phase := taugridv1.PhaseQueued
		if i%4 >= 2 {
			phase = taugridv1.PhaseRunning
		}
		run := builders.MakeTauRun(name, ns).Repository(fmt.Sprintf("repo-%04d", i%repos)).Phase(phase, "").Workload("Job", name+"-1", "runs").Obj()
		run.Status.Workload.Workload = "job-" + name + "-1"
		run.Status.Workload.Admitted = phase == taugridv1.PhaseRunning
		objs = append(objs, run, workload("job-"+name+"-1", ns))
	}
	for i := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%04d", i),
			Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200", "kubernetes.io/hostname": fmt.Sprintf("gpu-%04d", i)}}})
	}
	c := sharedtest.Builder(objs...).Build()
	old := benchPolicy(b, nil)
	tenants := exampleTree(b, nil)["tenants.yaml"]
	queues := exampleTree(b, nil)["kueue/cluster-queues.yaml"]
	next := benchPolicy(b, map[string]string{
		"tenants.yaml":              strings.Replace(tenants, "default_profile: h200-1\n  profiles: [cpu, h200-1, h200-8]", "default_profile: h200-8\n  profiles: [cpu, h200-8]", 1),
		"kueue/cluster-queues.yaml": strings.Replace(queues, "nominalQuota: 8\n        borrowingLimit: 0", "nominalQuota: 4\n        borrowingLimit: 0", 1),
	})
	ctx := context.Background()
	cluster, err := impact.Read(ctx, c, old.Policy)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read the cluster, once a poll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := impact.Read(ctx, c, old.Policy); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compute, each pull request", func(b *testing.B) {
		b.ReportAllocs()
		var pv *impact.Preview
		for b.Loop() {
			pv = impact.Compute(old, next, cluster, false)
		}
		if !strings.Contains(pv.Summary, "1 quota changed") || !strings.Contains(pv.Summary, "1 removal") {
			b.Fatalf("the preview of the change says %q", pv.Summary)
		}
	})
}

// workload is a queued Workload of one pod with one H200 GPU, as the
// example's default target renders it.
func workload(name, ns string) *kueue.Workload {
	wl := builders.MakeWorkload(name, ns).Obj()
	wl.Spec.QueueName = "runs"
	wl.Spec.PodSets = []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"},
		Containers: []corev1.Container{{Name: "main", Image: "nvcr.io/nvidia/pytorch:24.05-py3", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("128Gi")}}}},
	}}}}
	return wl
}

// benchPolicy loads the example platform with edits, as the controller
// loads a commit.
func benchPolicy(b *testing.B, edits map[string]string) *impact.Policy {
	b.Helper()
	_, pol, queues := loadExample(b, edits)
	return &impact.Policy{Policy: pol, Queues: queues}
}
