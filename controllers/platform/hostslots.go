package platform

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
)

// hostSlotQuota is each TAS flavor's quota of host slots in a ClusterQueue:
// more than any cluster has hosts, so the quota never binds; the nodes,
// one slot each, are the limit, and Kueue's TAS counts them.
const hostSlotQuota = int64(1_000_000)

// withHostSlots makes every resource group of a ClusterQueue that hands out
// a TAS flavor cover taugridv1.ResourceHostSlot, which each pod of a
// multi-node run on that flavor requests: without it Kueue would find the
// slot in no queue and admit none of those runs. A group that already
// covers the slot is the platform's own choice and left as written.
func withHostSlots(pol *render.Policy, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	tas := map[string]bool{}
	for _, t := range pol.Topologies {
		for _, f := range t.Flavors {
			tas[f.Name] = true
		}
	}
	if len(tas) == 0 {
		return objs, nil
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, u := range objs {
		out[i] = u
		if u.GetKind() != "ClusterQueue" {
			continue
		}
		groups, _, err := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
		if err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: spec.resourceGroups: %w", u.GetName(), err)
		}
		changed := false
		for _, g := range groups {
			if group, ok := g.(map[string]any); ok && addHostSlot(group, tas) {
				changed = true
			}
		}
		if !changed {
			continue
		}
		d := u.DeepCopy()
		if err := unstructured.SetNestedSlice(d.Object, groups, "spec", "resourceGroups"); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", u.GetName(), err)
		}
		out[i] = d
	}
	return out, nil
}

// addHostSlot adds the slot to a resource group holding a TAS flavor,
// with hostSlotQuota for every flavor of the group (Kueue wants each flavor
// to list every covered resource). It reports whether it changed the group.
func addHostSlot(group map[string]any, tas map[string]bool) bool {
	covered := anySlice(group["coveredResources"])
	if slices.Contains(covered, any(taugridv1.ResourceHostSlot)) {
		return false
	}
	flavors, _, _ := unstructured.NestedSlice(group, "flavors")
	holdsTAS := slices.ContainsFunc(flavors, func(f any) bool {
		name, _, _ := unstructured.NestedString(asMap(f), "name")
		return tas[name]
	})
	if !holdsTAS {
		return false
	}
	for _, f := range flavors {
		fm := asMap(f)
		resources, _, _ := unstructured.NestedSlice(fm, "resources")
		fm["resources"] = append(resources, map[string]any{"name": taugridv1.ResourceHostSlot, "nominalQuota": hostSlotQuota})
	}
	group["flavors"] = flavors
	group["coveredResources"] = append(slices.Clone(covered), taugridv1.ResourceHostSlot)
	return true
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}
