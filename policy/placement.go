package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/taugrid/taugrid/placement"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=topologies,verbs=get;list;watch;create;patch;delete

// maxListedNodes is how many nodes a refusal names before "and N more".
const maxListedNodes = 5

// checkPlacement refuses a run whose GPU pods could never be placed as
// asked on the cluster's nodes, even empty: not enough hosts in any one
// domain of the level, or no node of the profile at all. It reads the
// nodes from the cache (no API call per run), and only for runs whose
// profile places pods by a topology.
func checkPlacement(ctx context.Context, r client.Reader, plan *render.Plan) error {
	req, ok := plan.PlacementRequest()
	if !ok {
		return nil
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	ptrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		ptrs[i] = &nodes.Items[i]
	}
	if s := placement.Check(ptrs, req); s != nil {
		return plan.Config.ErrorAt(plan.PlacementField(), "%v: this run could never be placed (%s on topology %s)", s, placementWords(plan), plan.Placement.Topology.Name)
	}
	return nil
}

func placementWords(plan *render.Plan) string {
	if s := plan.Placement.String(); s != "any" {
		return "placement " + s
	}
	return "any placement"
}

// CheckTopologyNodes refuses a platform commit whose Topology does not
// describe the nodes of its flavors: a level label some of them lack
// (Kueue would silently leave those nodes out). The error names the
// Topology's file and line and the nodes missing each level. Flavors whose
// nodes have not joined yet are not judged.
func CheckTopologyNodes(ctx context.Context, r client.Reader, pol *render.Policy) error {
	var nodes corev1.NodeList
	if len(pol.Topologies) == 0 {
		return nil
	}
	if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var problems []string
	for _, name := range sortedKeys(pol.Topologies) {
		t := pol.Topologies[name]
		for _, f := range t.Flavors {
			members := flavorNodes(nodes.Items, f.NodeLabels)
			missing := t.MissingLevels(members)
			for _, l := range t.Levels {
				if names := missing[l.NodeLabel]; len(names) > 0 {
					problems = append(problems, fmt.Sprintf("%s:%d: Topology %s: level %s: %d of the %d nodes of flavor %s lack this label: %s",
						t.File, t.Line, t.Name, l.NodeLabel, len(names), len(members), f.Name, listNodes(names)))
				}
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}

func flavorNodes(nodes []corev1.Node, labels map[string]string) []*corev1.Node {
	var out []*corev1.Node
	for i := range nodes {
		n := &nodes[i]
		if matchesAll(n.Labels, labels) {
			out = append(out, n)
		}
	}
	return out
}

func matchesAll(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func listNodes(names []string) string {
	slices.Sort(names)
	if len(names) <= maxListedNodes {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListedNodes], ", "), len(names)-maxListedNodes)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkMIGQuotas refuses a platform whose profiles offer a MIG profile no
// ClusterQueue gives quota for: runs asking it could never be admitted.
func checkMIGQuotas(objs []*unstructured.Unstructured, pol *render.Policy) error {
	covered := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() != "ClusterQueue" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
		for _, g := range groups {
			names, _, _ := unstructured.NestedStringSlice(AsMap(g), "coveredResources")
			for _, n := range names {
				covered[n] = true
			}
		}
	}
	for _, pr := range pol.Profiles {
		for _, m := range pr.MIGProfiles {
			if res := render.MIGResource(m); !covered[res] {
				return fmt.Errorf("profile %s offers MIG profile %s, but no ClusterQueue in %s/ covers %s: give it quota in a ClusterQueue's resourceGroups", pr.Name, m, QueuesDir, res)
			}
		}
	}
	return nil
}
