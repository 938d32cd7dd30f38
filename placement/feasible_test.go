package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	blockLabel = "example.com/topology-block"
	rackLabel  = "example.com/topology-rack"
	pool       = "nvidia.com/gpu.product"
)

func testTopology(t testing.TB) *Topology {
	t.Helper()
	topo, err := NewTopology("gpu", []string{blockLabel, rackLabel, corev1.LabelHostname})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// node is an 8-GPU host in a block and rack.
func node(name, block, rack string) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("224"), corev1.ResourceMemory: resource.MustParse("2Ti"),
		"nvidia.com/gpu": resource.MustParse("8"),
	}
	labels := map[string]string{corev1.LabelHostname: name, pool: "NVIDIA-H200"}
	if block != "" {
		labels[blockLabel] = block
	}
	if rack != "" {
		labels[rackLabel] = rack
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

// twoBlocks is block b1 with racks r1 (3 hosts) and r2 (1 host), and block
// b2 with rack r1 (2 hosts): rack names repeat across blocks, as they do.
func twoBlocks() []*corev1.Node {
	return []*corev1.Node{
		node("n1", "b1", "r1"), node("n2", "b1", "r1"), node("n3", "b1", "r1"), node("n4", "b1", "r2"),
		node("n5", "b2", "r1"), node("n6", "b2", "r1"),
	}
}

func gpus(n int) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(n), resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("48")}
}

func TestCheckCountsHostsPerDomainAndSaysTheLargest(t *testing.T) {
	topo := testTopology(t)
	sel := map[string]string{pool: "NVIDIA-H200"}
	for name, tc := range map[string]struct {
		req  Request
		want string // "" when it fits
	}{
		"3 hosts fit rack b1/r1": {
			req: Request{Pods: 3, PerPod: gpus(8), Selector: sel, Topology: topo, Level: "rack", OnePerHost: true},
		},
		"4 hosts fit no rack, even though b1 has 4": {
			req:  Request{Pods: 4, PerPod: gpus(8), Selector: sel, Topology: topo, Level: "rack", OnePerHost: true},
			want: "needs 4 hosts with 8 nvidia.com/gpu, 48 cpu each in one rack, one pod per host; the largest rack (b1/r1) has 3",
		},
		"4 hosts fit block b1": {
			req: Request{Pods: 4, PerPod: gpus(8), Selector: sel, Topology: topo, Level: "block", OnePerHost: true},
		},
		"5 hosts fit no block": {
			req:  Request{Pods: 5, PerPod: gpus(8), Selector: sel, Topology: topo, Level: "block", OnePerHost: true},
			want: "needs 5 hosts with 8 nvidia.com/gpu, 48 cpu each in one block, one pod per host; the largest block (b1) has 4",
		},
		"small pods share hosts: 8 of 4 GPUs fit rack b1/r1's 3 hosts": {
			req: Request{Pods: 6, PerPod: gpus(4), Selector: sel, Topology: topo, Level: "rack"},
		},
		"7 pods of 4 GPUs fit no rack": {
			req:  Request{Pods: 7, PerPod: gpus(4), Selector: sel, Topology: topo, Level: "rack"},
			want: "needs room for 7 pods of 4 nvidia.com/gpu, 48 cpu in one rack; the largest rack (b1/r1) has room for 6",
		},
		"anywhere: 6 hosts": {
			req: Request{Pods: 6, PerPod: gpus(8), Selector: sel, Topology: topo, OnePerHost: true},
		},
		"anywhere: 7 hosts are too many": {
			req:  Request{Pods: 7, PerPod: gpus(8), Selector: sel, Topology: topo, OnePerHost: true},
			want: "needs 7 hosts with 8 nvidia.com/gpu, 48 cpu each, one pod per host; the cluster has 6",
		},
		"a pod larger than any host": {
			req:  Request{Pods: 1, PerPod: gpus(16), Selector: sel, Topology: topo, Level: "host"},
			want: "needs room for 1 pods of 16 nvidia.com/gpu, 48 cpu in one host; none of the 6 matching nodes has room for one",
		},
		"no node matches the profile": {
			req:  Request{Pods: 1, PerPod: gpus(1), Selector: map[string]string{pool: "NVIDIA-B200"}, Topology: topo, Level: "rack"},
			want: "no node matches this run's profile (nodes with nvidia.com/gpu.product=NVIDIA-B200, label example.com/topology-block, label example.com/topology-rack, label kubernetes.io/hostname)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Check(twoBlocks(), tc.req)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("Check refused a request that fits: %v", got)
			case tc.want != "" && got == nil:
				t.Errorf("Check let through a request that never fits, want %q", tc.want)
			case tc.want != "" && got.Error() != tc.want:
				t.Errorf("Check said\n %q\nwant\n %q", got.Error(), tc.want)
			}
		})
	}
}

// Kueue's TAS counts only nodes that carry every level's label: so does
// Check, and the platform check lists the nodes missing one.
func TestNodesMissingALevelDoNotCount(t *testing.T) {
	topo := testTopology(t)
	nodes := append(twoBlocks(), node("stray", "", "r9"))
	if s := Check(nodes, Request{Pods: 7, PerPod: gpus(8), Topology: topo, OnePerHost: true}); s == nil || s.Best != 6 {
		t.Errorf("a node without a block label counted: %v", s)
	}
	missing := topo.MissingLevels(nodes)
	if got := fmt.Sprint(missing); got != "map[example.com/topology-block:[stray]]" {
		t.Errorf("MissingLevels = %s, want only stray missing the block label", got)
	}
}

func TestNewTopologyNamesLevelsAndRefusesWhatKueueRefuses(t *testing.T) {
	topo, err := NewTopology("gpu", []string{"cloud.google.com/gce-topology-block", "nvidia.com/gpu.clique", corev1.LabelHostname})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(topo.Names()); got != "[same-host same-clique same-block]" {
		t.Errorf("Names = %s", got)
	}
	for name, labels := range map[string][]string{
		"no levels":             nil,
		"hostname not lowest":   {corev1.LabelHostname, rackLabel},
		"two levels named rack": {rackLabel, "other.io/rack"},
		"seventeen levels":      make([]string, 17),
	} {
		if _, err := NewTopology("t", labels); err == nil {
			t.Errorf("%s: NewTopology accepted %v", name, labels)
		}
	}
}

// TestOnePerHostCountsOnlyNodesOfferingAHostSlot: with the host slot, a
// node without one holds none of the pods, as Kueue's TAS and
// kube-scheduler count it; with none anywhere the refusal says why.
func TestOnePerHostCountsOnlyNodesOfferingAHostSlot(t *testing.T) {
	topo := testTopology(t)
	const slot = "taugrid.dev/host"
	slotted := func(nodes []*corev1.Node, names ...string) []*corev1.Node {
		for _, n := range nodes {
			for _, name := range names {
				if n.Name == name {
					n.Status.Allocatable[slot] = resource.MustParse("1")
				}
			}
		}
		return nodes
	}
	req := Request{Pods: 2, PerPod: gpus(4), Topology: topo, Level: "rack", OnePerHost: true, HostSlot: slot}
	if s := Check(slotted(twoBlocks(), "n1", "n2"), req); s != nil {
		t.Errorf("two slotted hosts of one rack refused: %v", s)
	}
	if s := Check(slotted(twoBlocks(), "n1", "n4"), req); s == nil || s.Best != 1 {
		t.Errorf("slotted hosts in two racks: %v, want the largest rack holding 1", s)
	}
	want := "needs 2 hosts with 4 nvidia.com/gpu, 48 cpu each in one rack, one pod per host; none of the 6 matching nodes offers taugrid.dev/host, which keeps such pods on distinct hosts: is tau-nodeagent running on them?"
	if s := Check(twoBlocks(), req); s == nil || s.Error() != want {
		t.Errorf("no slot anywhere: %v, want %q", s, want)
	}
}
