package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// migConfigLabel is the label NVIDIA's MIG manager puts on a node with the
// MIG layout its GPUs are split into.
const migConfigLabel = "nvidia.com/mig.config"

// migPlatform is the example platform with MIG: a flavor of nodes whose
// GPUs are split all-balanced, quota in team-a's ClusterQueue for one
// 1g.18gb and one 3g.71gb slice, and a profile "mig" offering both, of
// which the tenant may use only 1g.18gb.
func migPlatform(t *testing.T, prefix string) string {
	t.Helper()
	dir := examplePlatformCopy(t, prefix)
	appendFile(t, dir, "kueue/flavors.yaml", fmt.Sprintf("---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: %s-h200-mig\nspec:\n  nodeLabels:\n    %s: all-balanced\n", prefix, migConfigLabel))
	teamA := "        nominalQuota: 8\n        borrowingLimit: 8\n"
	editFile(t, dir, "kueue/cluster-queues.yaml", teamA, teamA+fmt.Sprintf(`  - coveredResources: [nvidia.com/mig-1g.18gb, nvidia.com/mig-3g.71gb]
    flavors:
    - name: %s-h200-mig
      resources:
      - name: nvidia.com/mig-1g.18gb
        nominalQuota: 1
      - name: nvidia.com/mig-3g.71gb
        nominalQuota: 1
`, prefix))
	appendFile(t, dir, "profiles.yaml", fmt.Sprintf(`- name: mig
  description: One MIG slice of an H200, for small jobs.
  node_selector:
    %s: all-balanced
  mig_profiles: [1g.18gb, 3g.71gb]
  max_gpus: 1
  max_nodes: 1
  defaults:
    gpus: 0
    cpu: "4"
    memory: 32Gi
`, migConfigLabel))
	editFile(t, dir, "tenants.yaml", "profiles: [cpu, h200-1, h200-8]", "profiles: [cpu, h200-1, h200-8, mig]\n  mig_profiles: [1g.18gb]")
	return dir
}

// migNode is an 8x H200 server whose GPUs the MIG manager split
// all-balanced (each GPU: two 1g.18gb, one 2g.35gb, one 3g.71gb), as the
// NVIDIA device plugin's mixed strategy advertises it: no whole GPU left.
func migNode(name string) *corev1.Node {
	n := controlplane.GPUNode(name)
	n.Labels[migConfigLabel] = "all-balanced"
	n.Labels["nvidia.com/mig.strategy"] = "mixed"
	for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		delete(l, "nvidia.com/gpu")
		l["nvidia.com/mig-1g.18gb"] = resource.MustParse("16")
		l["nvidia.com/mig-2g.35gb"] = resource.MustParse("8")
		l["nvidia.com/mig-3g.71gb"] = resource.MustParse("8")
	}
	return n
}

const migTau = "schema_version: 1\nentrypoint: train.py\nruntime:\n  image: nvcr.io/nvidia/pytorch:25.01-py3\npolicy:\n  profile: mig\n"

// On the real API server, Kueue and kube-scheduler, with a whole-GPU node
// and a MIG node: a run asking a MIG slice takes the ClusterQueue's MIG
// quota and runs on the MIG node; a slice the tenant may not use is refused
// before anything is submitted.
func TestMIGRunsTakeMIGQuotaAndLandOnMIGNodes(t *testing.T) {
	onCluster(t)
	f, _ := newRunFixtureOn(t, "mg1", migPlatform(t, "mg1"))
	addNode(t, controlplane.GPUNode("mg1-whole"))
	addNode(t, migNode("mg1-mig"))
	m := startManager(t)
	defer m.stop()

	f.research.write("tau/slice.yaml", migTau+"compute:\n  mig: 1g.18gb\n")
	f.research.write("tau/big-slice.yaml", migTau+"compute:\n  mig: 3g.71gb\n")
	f.research.commit("MIG runs")
	start := func(id, target string) *taugridv1.TauRun {
		t.Helper()
		f.research.runRef(id, "target: "+target+"\n")
		f.poll(t)
		return f.runOf(t, "refs/tau/runs/"+id)
	}

	t.Run("a 1g.18gb run is admitted on the MIG quota and its pod lands on the MIG node", func(t *testing.T) {
		run := start("slice", "slice")
		nodes := scheduledPods(t, run, 1)
		if nodes[0].Name != "mg1-mig" {
			t.Errorf("the pod landed on %s, want the MIG node mg1-mig", nodes[0].Name)
		}
		pod := podsOfRun(t, run)[0]
		res := pod.Spec.Containers[0].Resources
		if q := res.Limits["nvidia.com/mig-1g.18gb"]; q.Value() != 1 || res.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 0 {
			t.Errorf("the pod's limits are %v, want one nvidia.com/mig-1g.18gb and no whole GPU", res.Limits)
		}
		run = getRun(t, f.ns, run.Name)
		wl := &kueue.Workload{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: run.Status.Workload.Workload}, wl); err != nil {
			t.Fatal(err)
		}
		if a := wl.Status.Admission; a == nil || a.PodSetAssignments[0].Flavors["nvidia.com/mig-1g.18gb"] != "mg1-h200-mig" {
			t.Errorf("the workload's admission is %+v, want nvidia.com/mig-1g.18gb from flavor mg1-h200-mig", a)
		}
	})

	t.Run("a second 1g.18gb run waits: the queue's one slice is in use", func(t *testing.T) {
		run := start("slice-2", "slice")
		waitFor(t, 60*time.Second, "the second run to wait for MIG quota", func() bool {
			run = getRun(t, f.ns, run.Name)
			return run.Status.Phase == taugridv1.PhaseQueued && run.Status.Workload != nil &&
				strings.Contains(run.Status.Workload.Reason, `insufficient unused quota for nvidia.com/mig-1g.18gb in flavor mg1-h200-mig, 1 more needed`)
		})
		if !strings.Contains(run.Status.Message, "nvidia.com/mig-1g.18gb") {
			t.Errorf("the run's status says %q, want it to name nvidia.com/mig-1g.18gb", run.Status.Message)
		}
	})

	t.Run("a MIG profile the tenant may not use is refused before submission, with its line", func(t *testing.T) {
		run := start("big", "big-slice")
		waitFor(t, 30*time.Second, "the run to be refused", func() bool {
			run = getRun(t, f.ns, run.Name)
			return run.Status.Phase == taugridv1.PhaseFailed
		})
		want := `tau/big-slice.yaml:8:8: compute.mig: MIG profile 3g.71gb is not one tenant mg1-a may use on profile "mig"; it may use: 1g.18gb`
		if !strings.Contains(run.Status.Message, want) {
			t.Errorf("the refusal says %q, want it to contain %q", run.Status.Message, want)
		}
		var jobs batchv1.JobList
		if err := k8s.List(context.Background(), &jobs, client.InNamespace(f.ns), client.MatchingLabels{render.LabelRun: run.Name}); err != nil {
			t.Fatal(err)
		}
		if len(run.Status.Attempts) != 0 || len(jobs.Items) != 0 {
			t.Errorf("a refused run submitted something: attempts %v, jobs %d", run.Status.Attempts, len(jobs.Items))
		}
	})
}
