package sealing

import (
	"context"
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
