package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels of the topology fixture's nodes.
const (
	blockLabel = "example.com/topology-block"
	rackLabel  = "example.com/topology-rack"
	poolLabel  = "taugrid.dev/test-pool"
)

// topologyPlatform is the example platform with its GPU flavor made a TAS
// flavor of a block/rack/host Topology (on nodes labelled with pool),
// generous quotas, and a profile "fabric" on that topology.
func topologyPlatform(t *testing.T, prefix string) string {
	t.Helper()
	dir := examplePlatformCopy(t, prefix)
	edit := func(file, old, new string) { editFile(t, dir, file, old, new) }
	edit("kueue/flavors.yaml", "spec:\n  nodeLabels:\n", fmt.Sprintf("spec:\n  topologyName: %s-fabric\n  nodeLabels:\n    %s: %s\n", prefix, poolLabel, prefix))
	edit("kueue/cluster-queues.yaml", "nominalQuota: \"96\"", "nominalQuota: \"2000\"")
	edit("kueue/cluster-queues.yaml", "nominalQuota: 1024Gi", "nominalQuota: 20Ti")
	edit("kueue/cluster-queues.yaml", "nominalQuota: 8\n        borrowingLimit: 8", "nominalQuota: 64\n        borrowingLimit: 8")
	topology := fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata:\n  name: %s-fabric\nspec:\n  levels:\n  - nodeLabel: %s\n  - nodeLabel: %s\n  - nodeLabel: kubernetes.io/hostname\n",
		prefix, blockLabel, rackLabel)
	if err := os.WriteFile(filepath.Join(dir, "kueue/topology.yaml"), []byte(topology), 0o644); err != nil {
		t.Fatal(err)
	}
	appendFile(t, dir, "profiles.yaml", fmt.Sprintf("- name: fabric\n  description: Whole H200 nodes on a block/rack fabric.\n  node_selector:\n    nvidia.com/gpu.product: NVIDIA-H200\n  topology: %s-fabric\n  max_gpus: 64\n  max_nodes: 8\n  defaults:\n    gpus: 8\n    cpu: \"48\"\n    memory: 512Gi\n    head_cpu: \"4\"\n    head_memory: 16Gi\n", prefix))
	edit("tenants.yaml", "profiles: [cpu, h200-1, h200-8]", "profiles: [cpu, h200-1, h200-8, fabric]")
	return dir
}

// fabricNodes are two blocks of two racks of two 8-GPU hosts, in the pool.
func fabricNodes(t *testing.T, prefix string) {
	t.Helper()
	for b := 1; b <= 2; b++ {
		for r := 1; r <= 2; r++ {
			for h := 1; h <= 2; h++ {
				n := controlplane.GPUNode(fmt.Sprintf("%s-b%d-r%d-h%d", prefix, b, r, h))
				n.Labels[poolLabel] = prefix
				n.Labels[blockLabel] = fmt.Sprintf("b%d", b)
				n.Labels[rackLabel] = fmt.Sprintf("r%d", r) // rack names repeat across blocks
				addNode(t, n)
			}
		}
	}
}

// newTopologyFixture is newRunFixture on the topology platform.
func newTopologyFixture(t *testing.T, prefix string) (*runFixture, *platformFixture) {
	t.Helper()
	return newRunFixtureOn(t, prefix, topologyPlatform(t, prefix))
}

// editFile replaces the first old in a file of dir with new; the file must
// hold old.
func editFile(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	data, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(data), old) {
		t.Fatalf("%s lacks %q (%v)", file, old, err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// appendFile adds text at the end of a file of dir.
func appendFile(t *testing.T, dir, file, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
}

const fabricTau = "schema_version: 1\nentrypoint: train.py\nruntime:\n  image: nvcr.io/nvidia/pytorch:25.01-py3\npolicy:\n  profile: fabric\n"

// scheduledPods waits until the run has n pods bound to nodes and returns
// those nodes; for a RayJob, only its Ray pods (not the submitter) count.
func scheduledPods(t *testing.T, run *taugridv1.TauRun, n int) []*corev1.Node {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, 90*time.Second, fmt.Sprintf("%d pods of run %s on nodes", n, run.Name), func() bool {
		pods = pods[:0]
		for _, p := range podsOfRun(t, run) {
			ray := run.Status.Workload != nil && run.Status.Workload.Kind == "RayJob"
			if p.Spec.NodeName != "" && (!ray || p.Labels["ray.io/node-type"] != "") {
				pods = append(pods, p)
			}
		}
		return len(pods) >= n
	})
	var nodes []*corev1.Node
	for _, p := range pods {
		node := &corev1.Node{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node)
	}
	return nodes
}

func domains(nodes []*corev1.Node, labels ...string) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodes {
		var parts []string
		for _, l := range labels {
			parts = append(parts, n.Labels[l])
		}
		out[strings.Join(parts, "/")] = true
	}
	return out
}

// On the real API server, Kueue (TAS) and kube-scheduler, with kwok nodes
// in two blocks of two racks of two hosts.
func TestPlacementOnATopologyOfBlocksAndRacks(t *testing.T) {
	onCluster(t)
	f, plat := newTopologyFixture(t, "tp1")
	fabricNodes(t, "tp1")
	m := startManager(t)
	defer m.stop()

	f.research.write("tau/pair.yaml", fabricTau+"execution:\n  launcher: torchrun\ncompute:\n  nodes: 2\n  placement: same-rack\n")
	f.research.write("tau/wide.yaml", fabricTau+"execution:\n  launcher: torchrun\ncompute:\n  nodes: 3\n  placement: same-rack\n")
	f.research.write("tau/spread.yaml", fabricTau+"execution:\n  launcher: torchrun\ncompute:\n  nodes: 3\n  placement: prefer-same-rack\n")
	f.research.write("tau/ray.yaml", fabricTau+"compute:\n  workers: 2\n  placement: same-block\n")
	f.research.write("tau/half.yaml", fabricTau+"execution:\n  launcher: torchrun\ncompute:\n  nodes: 2\n  gpus: 4\n  placement: same-rack\n")
	f.research.write("tau/wide-half.yaml", fabricTau+"execution:\n  launcher: torchrun\ncompute:\n  nodes: 3\n  gpus: 4\n  placement: same-rack\n")
	f.research.commit("placements")

	start := func(id, target string) *taugridv1.TauRun {
		t.Helper()
		f.research.runRef(id, "target: "+target+"\n")
		f.poll(t)
		return f.runOf(t, "refs/tau/runs/"+id)
	}

	t.Run("a 2-node torchrun run with same-rack lands both pods in one rack, one per host", func(t *testing.T) {
		oneRackOnePerHost(t, start("pair", "pair"))
	})

	t.Run("more hosts than any rack has is refused before submission, with its line", func(t *testing.T) {
		for id, gpus := range map[string]int{"wide": 8, "wide-half": 4} { // 4-GPU pods would fit 2 a host, but one pod per host
			run := start(id, id)
			waitFor(t, 30*time.Second, "the run to be refused", func() bool {
				run = getRun(t, f.ns, run.Name)
				return run.Status.Phase == taugridv1.PhaseFailed
			})
			want := fmt.Sprintf("tau/%s.yaml:%d:14: compute.placement: needs 3 hosts with %d nvidia.com/gpu, 48 cpu, 512Gi memory each in one rack, one pod per host; the largest rack (b1/r1) has 2",
				id, map[string]int{"wide": 11, "wide-half": 12}[id], gpus)
			if !strings.Contains(run.Status.Message, want) {
				t.Errorf("the refusal says %q, want it to contain %q", run.Status.Message, want)
			}
			if len(run.Status.Attempts) != 0 {
				t.Errorf("a refused run submitted something: attempts %v", run.Status.Attempts)
			}
		}
	})

	t.Run("a preferred rack falls back to one block when no rack has room", func(t *testing.T) {
		run := start("spread", "spread")
		nodes := scheduledPods(t, run, 3)
		if blocks := domains(nodes, blockLabel); len(blocks) != 1 {
			t.Errorf("the pods landed in blocks %v, want one", blocks)
		}
		if racks := domains(nodes, blockLabel, rackLabel); len(racks) < 2 {
			t.Errorf("3 pods fit in rack %v, whose 2 hosts hold one pod each?", racks)
		}
	})

	t.Run("a RayJob's head and workers share a block", func(t *testing.T) {
		run := start("ray", "ray")
		nodes := scheduledPods(t, run, 3) // the head and two workers
		if blocks := domains(nodes, blockLabel); len(blocks) != 1 {
			t.Errorf("the Ray pods landed in blocks %v, want one", blocks)
		}
	})

	t.Run("two pods that would fit one host still land on two hosts of one rack, as Kueue assigned them", func(t *testing.T) {
		freeFabric(t, f.ns, "tp1")
		run := start("half", "half")
		nodes := oneRackOnePerHost(t, run)
		// The attempt records where its pods run, for its evidence.
		want := []string{nodes[0].Name, nodes[1].Name}
		slices.Sort(want)
		waitFor(t, 30*time.Second, "the attempt to record its nodes", func() bool {
			run = getRun(t, f.ns, run.Name)
			return len(run.Status.Attempts) == 1 && slices.Equal(run.Status.Attempts[0].Nodes, want)
		})
	})

	t.Run("a Topology with a level no node carries is refused with file and line", func(t *testing.T) {
		f := plat
		f.repo.edit("kueue/topology.yaml", "  - nodeLabel: kubernetes.io/hostname\n", "  - nodeLabel: example.com/topology-shelf\n  - nodeLabel: kubernetes.io/hostname\n")
		f.repo.commit("a shelf level")
		p := f.reconcile(t)
		stalled := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionStalled)
		want := "kueue/topology.yaml:1: Topology tp1-fabric: level example.com/topology-shelf: 8 of the 8 nodes of flavor tp1-h200 lack this label: tp1-b1-r1-h1, tp1-b1-r1-h2, tp1-b1-r2-h1, tp1-b1-r2-h2, tp1-b2-r1-h1 and 3 more"
		if stalled == nil || !strings.Contains(stalled.Message, want) {
			t.Errorf("Stalled = %+v, want a message containing %q", stalled, want)
		}
	})

	t.Run("removing a flavor's topology, which Kueue never applies, is refused with file, line and what to do instead", func(t *testing.T) {
		f := plat
		f.repo.edit("kueue/topology.yaml", "  - nodeLabel: example.com/topology-shelf\n", "")
		f.repo.edit("kueue/flavors.yaml", "  topologyName: tp1-fabric\n", "")
		f.repo.edit("profiles.yaml", "  topology: tp1-fabric\n", "")
		f.repo.commit("topology placement off, the wrong way: the flavor's topologyName removed")
		p := f.reconcile(t)
		stalled := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionStalled)
		for _, want := range []string{"kueue/flavors.yaml:2: ResourceFlavor tp1-h200: ", "topologyName is immutable when topologyName is set",
			"declare the changed one under a new name, point the ClusterQueues at it, and remove the old one"} {
			if stalled == nil || !strings.Contains(stalled.Message, want) {
				t.Errorf("Stalled = %+v, want a message containing %q", stalled, want)
			}
		}
	})

	t.Run("the documented way switches topology placement off", func(t *testing.T) {
		freeFabric(t, f.ns, "tp1")
		p := plat
		p.repo.write("kueue/flavors.yaml", fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: tp1-h200-flat\nspec:\n  nodeLabels:\n    %s: tp1\n    nvidia.com/gpu.product: NVIDIA-H200\n", poolLabel))
		queues := readFile(t, p.repo.work, "kueue/cluster-queues.yaml")
		p.repo.write("kueue/cluster-queues.yaml", strings.ReplaceAll(queues, "name: tp1-h200\n", "name: tp1-h200-flat\n"))
		if strings.Contains(readFile(t, p.repo.work, "profiles.yaml"), "  topology: tp1-fabric\n") {
			p.repo.edit("profiles.yaml", "  topology: tp1-fabric\n", "")
		}
		p.repo.commit("topology placement off: a flavor without a topology")
		got := p.reconcile(t)
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, taugridv1.ConditionReady) || apimeta.FindStatusCondition(got.Status.Conditions, taugridv1.ConditionStalled) != nil {
			t.Fatalf("the platform did not take the commit: %+v", got.Status.Conditions)
		}
		f.research.write("tau/flat.yaml", fabricTau+"execution:\n  launcher: torchrun\ncompute:\n  nodes: 2\n")
		f.research.commit("a run without topology")
		run := start("flat", "flat")
		nodes := scheduledPods(t, run, 2)
		if nodes[0].Name == nodes[1].Name {
			t.Errorf("both pods on host %s, want one per host", nodes[0].Name)
		}
		for _, pod := range podsOfRun(t, run) {
			for k := range pod.Annotations {
				if strings.HasPrefix(k, "kueue.x-k8s.io/podset-") {
					t.Errorf("pod %s still carries TAS annotation %s", pod.Name, k)
				}
			}
		}
	})
}

// oneRackOnePerHost waits for the run's two pods to be bound and checks
// they share a rack, not a host, where Kueue's topology assignment put
// them (its ungater pins each pod to its assigned host: not chance).
func oneRackOnePerHost(t *testing.T, run *taugridv1.TauRun) []*corev1.Node {
	t.Helper()
	nodes := scheduledPods(t, run, 2)
	if racks := domains(nodes, blockLabel, rackLabel); len(racks) != 1 {
		t.Errorf("the pods landed in racks %v, want one", racks)
	}
	if nodes[0].Name == nodes[1].Name {
		t.Errorf("both pods on host %s, want one per host", nodes[0].Name)
	}
	for _, p := range podsOfRun(t, run) {
		if p.Spec.NodeSelector[corev1.LabelHostname] != p.Spec.NodeName {
			t.Errorf("pod %s on %s has node selector %v, not Kueue's topology assignment", p.Name, p.Spec.NodeName, p.Spec.NodeSelector)
		}
	}
	return nodes
}

// freeFabric deletes the tenant's Jobs and RayJobs (their runs fail) and
// waits until no pod of theirs holds a node of the pool: kwok's pods run
// until they are deleted.
func freeFabric(t *testing.T, ns, pool string) {
	t.Helper()
	ctx := context.Background()
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	if err := k8s.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), bg); err != nil {
		t.Fatal(err)
	}
	if err := k8s.DeleteAllOf(ctx, &rayv1.RayJob{}, client.InNamespace(ns), bg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the fabric's pods to be gone", func() bool {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Spec.NodeName, pool+"-") {
				return false
			}
		}
		return true
	})
}

func readFile(t *testing.T, dir, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
