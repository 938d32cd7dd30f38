package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"

	"github.com/taugrid/taugrid/render"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// QueuesDir is the platform repo directory (beside the policy files) that
// declares Kueue objects and tenant namespaces.
const QueuesDir = "kueue"

// Kinds the platform repo may declare, in apply order. Namespaces are
// applied but never pruned: deleting one would delete a tenant's work.
var QueueKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Topology"},
	{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ResourceFlavor"},
	{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadPriorityClass"},
	{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Cohort"},
	{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ClusterQueue"},
	{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "LocalQueue"},
}

// Prunable reports whether TauGrid deletes objects of this kind when they
// leave the repo.
func Prunable(gvk schema.GroupVersionKind) bool { return gvk.Kind != "Namespace" }

// ReadQueueDir reads every YAML document of dir's *.yaml files in name
// order; check, when set, vets each document, its error prefixed by the file.
func ReadQueueDir(tree fs.FS, dir string, check func(*unstructured.Unstructured) error) ([]*unstructured.Unstructured, error) {
	files, err := fs.Glob(tree, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	vet := check
	if vet == nil {
		vet = func(*unstructured.Unstructured) error { return nil }
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		docs, err := readDocuments(tree, f)
		if err != nil {
			return nil, err
		}
		for _, u := range docs {
			if err := vet(u); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
		objs = append(objs, docs...)
	}
	return objs, nil
}

// LoadQueues reads every YAML document under kueue/ in a policy tree and
// checks it against the policy: only the kinds above, LocalQueues only in
// tenant namespaces, every tenant queue declared, no cohort cycles. Errors
// name the file and document.
func LoadQueues(tree fs.FS, pol *render.Policy) ([]*unstructured.Unstructured, error) {
	objs, err := ReadQueueDir(tree, QueuesDir, nil)
	if err != nil {
		return nil, err
	}
	if err := checkQueues(objs, pol); err != nil {
		return nil, err
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return KindOrder(a) - KindOrder(b) })
	return objs, nil
}

func readDocuments(tree fs.FS, file string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(tree, file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if KindOrder(u) < 0 {
			return nil, fmt.Errorf("%s: document %d: %s %q is not allowed here; expected one of: Namespace, Topology, ResourceFlavor, WorkloadPriorityClass, Cohort, ClusterQueue, LocalQueue (kueue.x-k8s.io/v1beta2)",
				file, i, u.GetObjectKind().GroupVersionKind(), u.GetName())
		}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d: %s has no metadata.name", file, i, u.GetKind())
		}
		objs = append(objs, u)
	}
}

// KindOrder is the order in which a kind of the policy repo's Kueue
// objects is applied: what others refer to first.
func KindOrder(u *unstructured.Unstructured) int {
	return slices.Index(QueueKinds, u.GroupVersionKind())
}

// checkQueues enforces tenancy and cohort sanity across documents.
func checkQueues(objs []*unstructured.Unstructured, pol *render.Policy) error {
	local := map[string]bool{} // namespace/name of declared LocalQueues
	parents := map[string]string{}
	for _, u := range objs {
		switch u.GetKind() {
		case "LocalQueue":
			t := pol.TenantForNamespace(u.GetNamespace())
			if t == nil {
				return fmt.Errorf("LocalQueue %s/%s: namespace %q belongs to no tenant in tenants.yaml", u.GetNamespace(), u.GetName(), u.GetNamespace())
			}
			local[u.GetNamespace()+"/"+u.GetName()] = true
		case "Cohort":
			parent, _, _ := unstructured.NestedString(u.Object, "spec", "parentName")
			parents[u.GetName()] = parent
		}
		if err := CheckQuotas(u); err != nil {
			return err
		}
	}
	for _, t := range pol.Tenants {
		for _, q := range t.Queues {
			if !local[t.Namespace+"/"+q] {
				return fmt.Errorf("tenant %s submits to LocalQueue %s/%s, which %s/ does not declare", t.Name, t.Namespace, q, QueuesDir)
			}
		}
	}
	if err := checkMIGQuotas(objs, pol); err != nil {
		return err
	}
	return checkCohortCycles(parents)
}

// checkCohortCycles refuses cohorts whose parents loop back to themselves.
func checkCohortCycles(parents map[string]string) error {
	for _, start := range slices.Sorted(maps.Keys(parents)) {
		seen := map[string]bool{}
		for c := start; c != ""; c = parents[c] {
			if seen[c] {
				return fmt.Errorf("cohort %s: its parents form a cycle through %s", start, c)
			}
			seen[c] = true
		}
	}
	return nil
}

// CheckQuotas refuses quotas and limits that are not non-negative
// quantities in a ClusterQueue's or Cohort's resource groups: Kueue's
// admission webhook would, but TauGrid checks before anything is applied.
func CheckQuotas(u *unstructured.Unstructured) error {
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
	for gi, g := range groups {
		flavors, _, _ := unstructured.NestedSlice(AsMap(g), "flavors")
		for fi, f := range flavors {
			resources, _, _ := unstructured.NestedSlice(AsMap(f), "resources")
			for ri, r := range resources {
				for _, field := range []string{"nominalQuota", "borrowingLimit", "lendingLimit"} {
					v, ok := AsMap(r)[field]
					if !ok {
						continue
					}
					q, err := render.ParseQuantity(fmt.Sprint(v))
					if err != nil || q.Sign() < 0 {
						return fmt.Errorf("%s %s: spec.resourceGroups[%d].flavors[%d].resources[%d].%s: %v is not a non-negative quantity",
							u.GetKind(), u.GetName(), gi, fi, ri, field, v)
					}
				}
			}
		}
	}
	return nil
}

// AsMap is v as a map, or nil when it is not one.
func AsMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
