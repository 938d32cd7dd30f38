package run

import (
	"fmt"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// What deriving a phase from pods costs a reconcile: a Ray run of 64
// workers, one of them on no node, the worst case (every pod read, the
// held one explained).
func BenchmarkDeriveProgressFromPods(b *testing.B) {
	pods := []corev1.Pod{runningPod("head", "head")}
	for i := range 63 {
		pods = append(pods, runningPod(fmt.Sprintf("w-%d", i), "worker"))
	}
	pods = append(pods, unschedulablePod("w-63", "worker", "0/64 nodes are available: 64 Insufficient nvidia.com/gpu."))
	obs := Observed{RayJob: rayJobWith(64, rayv1.JobDeploymentStatusRunning),
		Workload: workload(cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "")), Pods: pods}
	b.ReportAllocs()
	for b.Loop() {
		if p := DeriveProgress(obs); !p.Held {
			b.Fatal("not held")
		}
	}
}
