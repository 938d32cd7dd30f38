package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// occupyHost runs a pod Kueue does not manage on a node, holding all its
// GPUs until t ends; Kueue's topology-aware scheduling counts it.
func occupyHost(t *testing.T, node string) {
	t.Helper()
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "busy-" + node, Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "work", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	waitFor(t, 30*time.Second, "pod "+pod.Name+" running", func() bool {
		_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)
		return pod.Status.Phase == corev1.PodRunning
	})
}

// On the real API server, Kueue and kube-scheduler: a 2-node same-rack run
// that its quota and an empty rack could hold, while one host of every
// rack is busy, waits queued with Kueue's own topology message on its
// status, explained in plain words; none of its pods is placed.
func TestARunWaitingForARackSaysWhyInPlainWords(t *testing.T) {
	onCluster(t)
	f, _ := newTopologyFixture(t, "tp2")
	fabricNodes(t, "tp2")
	for b := 1; b <= 2; b++ {
		for r := 1; r <= 2; r++ {
			occupyHost(t, fmt.Sprintf("tp2-b%d-r%d-h1", b, r))
		}
	}
	m := startManager(t)
	defer m.stop()

	f.research.write("tau/pair.yaml", fabricTau+"execution:\n  launcher: torchrun\ncompute:\n  nodes: 2\n  placement: same-rack\n")
	f.research.commit("a pair")
	f.research.runRef("pair", "target: pair\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/pair")

	kueueSays := `topology "tp2-fabric" allows to fit only 1 out of 2 pod(s)`
	waitFor(t, 60*time.Second, "the run to wait with Kueue's topology message", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Workload != nil && strings.Contains(run.Status.Workload.Reason, kueueSays)
	})
	want := "queued #1 of 1 in tp2-a: only 1 of the run's 2 pods fit as asked on topology tp2-fabric now; of 8 nodes, 4 lack free nvidia.com/gpu"
	if run.Status.Phase != taugridv1.PhaseQueued || run.Status.Message != want {
		t.Errorf("the run is %s saying %q, want Queued saying %q", run.Status.Phase, run.Status.Message, want)
	}
	for _, p := range podsOfRun(t, run) {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of a waiting run is on node %s", p.Name, p.Spec.NodeName)
		}
	}
}
