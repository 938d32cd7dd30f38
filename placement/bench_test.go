package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkCheck1000Nodes is the feasibility check of one multi-node run
// against a cluster of 1,000 8-GPU nodes in 10 blocks of 10 racks, as the
// controller runs it from its node cache before each submission.
func BenchmarkCheck1000Nodes(b *testing.B) {
	topo := testTopology(b)
	nodes := make([]*corev1.Node, 0, 1000)
	for i := range 1000 {
		nodes = append(nodes, node(fmt.Sprintf("n%04d", i), fmt.Sprintf("b%d", i/100), fmt.Sprintf("r%d", i/10%10)))
	}
	req := Request{Pods: 16, PerPod: gpus(8), Selector: map[string]string{pool: "NVIDIA-H200"}, Topology: topo, Level: "rack", OnePerHost: true}
	b.ReportAllocs()
	for b.Loop() {
		if s := Check(nodes, req); s == nil || s.Best != 10 {
			b.Fatalf("Check = %v, want the largest rack to hold 10", s)
		}
	}
}
