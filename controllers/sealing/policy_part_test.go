package sealing

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
)

// A team's evidence bundle holds only the part of the platform policy that
// applied to its run: read from team-b's side, team-a's bundle names
// nothing of team-b (its namespace, repositories, volumes, the profile only
// it may use), and still re-renders byte for byte, as tau evidence verify
// checks it; the policy commit and the whole policy's digest are recorded
// for the rest.
func TestTheBundleKeepsOnlyThePolicyThatAppliedToTheRun(t *testing.T) {
	w := newSealWorld(t, nil, hfSecret(), researchRepo(), attemptJob(), attemptWorkload(), sealingRun().Obj())
	if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	_, rec, content := w.bundle(t, 1)
	for name, data := range content {
		if !strings.HasPrefix(name, evidence.PrefixPolicy) {
			continue
		}
		for _, other := range []string{"team-b", "h200-32"} {
			if strings.Contains(string(data), other) {
				t.Errorf("the bundle's %s names %q, another team's:\n%s", name, other, data)
			}
		}
	}
	if _, ok := content[evidence.PrefixPolicy+"tenants.yaml"]; !ok || !strings.Contains(string(content[evidence.PrefixPolicy+"tenants.yaml"]), "team-a") {
		t.Errorf("the bundle lacks the run's own tenant: %s", content[evidence.PrefixPolicy+"tenants.yaml"])
	}
	whole, err := render.LoadPolicy(mapFS(policyFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Inputs.PolicyCommit != policyHead {
		t.Errorf("policy commit %q, want %q", rec.Inputs.PolicyCommit, policyHead)
	}
	if !strings.Contains(string(content[evidence.ArtifactRenderInputs]), whole.Digest) {
		t.Errorf("the render inputs do not name the whole policy's digest %s", whole.Digest)
	}
	raw, err := w.store.Manifest(context.Background(), evidence.Key{Namespace: ns, Run: "r", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep := evidence.Verify(context.Background(), raw, w.store); !rep.Reproduced || len(rep.Problems) > 0 {
		t.Errorf("verify: reproduced %v, problems %v; want the manifests re-rendered from the policy part", rep.Reproduced, rep.Problems)
	}
}

// A topology-aware run's bundle records its manifests as the run
// reconciler rendered them, under the whole policy at the commit, its
// kueue/ Topology included: its pods' placement annotation is in them, and
// tau evidence verify renders them again from the bundle's part of the
// policy, which names the Topology and team-a's pool, not team-b's.
// Parsed again from the policy's top-level files alone, as the sealer once
// did, the policy named a Topology it did not declare, and the bundle
// held no manifests at all, only a note that the render failed.
func TestATopologyAwareRunsBundleHoldsItsManifests(t *testing.T) {
	w := newSealWorld(t, nil, hfSecret(), researchRepo(), attemptJob(), attemptWorkload(), sealingRun().Obj())
	files := policyFiles(t)
	files["kueue/topology.yaml"] = []byte("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata:\n  name: gpu-fabric\nspec:\n  levels:\n  - nodeLabel: example.com/rack\n  - nodeLabel: kubernetes.io/hostname\n")
	flavors, err := os.ReadFile("../../examples/platform/kueue/flavors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Beside the pool of team-a's profile, one that team-b has to itself.
	files["kueue/flavors.yaml"] = append(bytes.Replace(flavors, []byte("spec:\n  nodeLabels:\n"), []byte("spec:\n  topologyName: gpu-fabric\n  nodeLabels:\n"), 1),
		[]byte("---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: h200-team-b\nspec:\n  topologyName: gpu-fabric\n  nodeLabels:\n    nvidia.com/gpu.product: NVIDIA-H200\n    example.com/pool: team-b\n")...)
	files["profiles.yaml"] = bytes.Replace(files["profiles.yaml"], []byte("- name: h200-1\n"), []byte("- name: h200-1\n  topology: gpu-fabric\n"), 1)
	w.e.Policies = &fakePolicies{files: files}
	if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	_, rec, content := w.bundle(t, 1)
	manifests := string(content[evidence.ArtifactManifests])
	if !strings.Contains(manifests, render.AnnotationUnconstrainedTopology) {
		t.Errorf("the bundle's manifests lack the pods' placement (%s); notes %q:\n%s", render.AnnotationUnconstrainedTopology, rec.Notes, manifests)
	}
	// tau evidence verify renders them again from the bundle's part of the
	// policy: the Topology and its flavor are in it.
	raw, err := w.store.Manifest(context.Background(), evidence.Key{Namespace: ns, Run: "r", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep := evidence.Verify(context.Background(), raw, w.store); !rep.Reproduced || len(rep.Problems) > 0 {
		t.Errorf("verify: reproduced %v, problems %v; want the manifests re-rendered from the policy part", rep.Reproduced, rep.Problems)
	}
	if got := string(content[evidence.PrefixPolicy+"kueue/topology.yaml"]); !strings.Contains(got, "name: gpu-fabric") || !strings.Contains(got, "topologyName: gpu-fabric") {
		t.Errorf("the bundle's policy/kueue/topology.yaml:\n%s\nwant the Topology gpu-fabric and its flavor", got)
	}
	for name, data := range content {
		if strings.HasPrefix(name, evidence.PrefixPolicy) && strings.Contains(string(data), "team-b") {
			t.Errorf("the bundle's %s names team-b's pool:\n%s", name, data)
		}
	}
}
