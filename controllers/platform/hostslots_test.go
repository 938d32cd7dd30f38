package platform

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
)

func clusterQueue(groups ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": "team-a"},
		"spec":     map[string]any{"resourceGroups": groups},
	}}
}

func group(covered []any, flavors ...string) map[string]any {
	var fs []any
	for _, f := range flavors {
		var rs []any
		for _, r := range covered {
			rs = append(rs, map[string]any{"name": r, "nominalQuota": "8"})
		}
		fs = append(fs, map[string]any{"name": f, "resources": rs})
	}
	return map[string]any{"coveredResources": covered, "flavors": fs}
}

// TestHostSlotsAreCoveredWhereATASFlavorIsHandedOut: the resource group of
// a TAS flavor covers the host slot, for each of its flavors; other groups,
// and a group the platform covered itself, are left as written.
func TestHostSlotsAreCoveredWhereATASFlavorIsHandedOut(t *testing.T) {
	pol := &render.Policy{Topologies: map[string]*render.PlatformTopology{
		"fabric": {Flavors: []*render.PlatformFlavor{{Name: "h200-tas"}}},
	}}
	gpu := []any{"cpu", "memory", "nvidia.com/gpu"}
	own := []any{"nvidia.com/gpu", taugridv1.ResourceHostSlot}
	in := clusterQueue(group(gpu, "h200-tas", "h200-spot"), group([]any{"cpu"}, "cpu-only"), group(own, "h200-tas"))
	out, err := withHostSlots(pol, []*unstructured.Unstructured{in})
	if err != nil {
		t.Fatal(err)
	}
	want := clusterQueue(group(append(gpu[:3:3], taugridv1.ResourceHostSlot), "h200-tas", "h200-spot"), group([]any{"cpu"}, "cpu-only"), group(own, "h200-tas"))
	for _, f := range want.Object["spec"].(map[string]any)["resourceGroups"].([]any)[0].(map[string]any)["flavors"].([]any) {
		rs := f.(map[string]any)["resources"].([]any)
		rs[len(rs)-1] = map[string]any{"name": taugridv1.ResourceHostSlot, "nominalQuota": hostSlotQuota}
	}
	if diff := cmp.Diff(want.Object, out[0].Object); diff != "" {
		t.Errorf("ClusterQueue (-want +got):\n%s", diff)
	}
	if _, ok := in.Object["spec"].(map[string]any)["resourceGroups"].([]any)[0].(map[string]any)["coveredResources"].([]any); !ok ||
		len(in.Object["spec"].(map[string]any)["resourceGroups"].([]any)[0].(map[string]any)["coveredResources"].([]any)) != 3 {
		t.Error("the policy's own ClusterQueue was changed in place")
	}

	none, err := withHostSlots(&render.Policy{}, []*unstructured.Unstructured{in})
	if err != nil || none[0] != in {
		t.Errorf("a platform without TAS flavors: %v, %v; want its queues as written", none, err)
	}
}
