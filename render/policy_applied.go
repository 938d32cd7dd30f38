package render

import (
	"fmt"
	"slices"

	goyaml "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// AppliedTo is the part of the policy that applies to one tenant's runs,
// as policy files that LoadPolicy reads back and RenderConfig renders
// from exactly as from the whole: the tenant itself, the profiles it may
// use, and the platform-wide rules (images, priorities, limits, pod
// security). Other tenants, the profiles only they may use (whose
// ingress peers may name their namespaces) and the worker clusters are
// left out: an evidence bundle a team reads, or hands to an auditor, shows
// nothing of another team. The Topologies its profiles place pods by are
// in kueue/topology.yaml, each with the ResourceFlavors placed by it whose
// node labels a profile of the tenant selects (appliedTopologies): a
// topology-aware run renders from them. The policy commit and Digest name
// the whole.
func (p *Policy) AppliedTo(tenant string) (map[string][]byte, error) {
	t := p.Tenant(tenant)
	if t == nil {
		return nil, fmt.Errorf("tenant %s is not in the policy", tenant)
	}
	var profiles []Profile
	for _, pr := range p.Profiles {
		if t.mayUse(pr.Name) {
			profiles = append(profiles, pr)
		}
	}
	parts := map[string]any{
		"tenants.yaml":  map[string]any{"tenants": []Tenant{*t}},
		"profiles.yaml": map[string]any{"profiles": profiles},
		"images.yaml":   p.Images,
		"limits.yaml":   p.Limits,
		"security.yaml": p.Security,
	}
	if len(p.Priorities) > 0 {
		parts["priorities.yaml"] = map[string]any{"priorities": p.Priorities}
	}
	out := make(map[string][]byte, len(parts)+1)
	for name, v := range parts {
		data, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("writing the policy's %s for tenant %s: %w", name, tenant, err)
		}
		out[name] = data
	}
	if docs := appliedTopologies(p, profiles); docs != nil {
		data, err := yamlDocs(docs, goyaml.Marshal)
		if err != nil {
			return nil, fmt.Errorf("writing the policy's %s/topology.yaml for tenant %s: %w", kueueDir, tenant, err)
		}
		out[kueueDir+"/topology.yaml"] = data
	}
	return out, nil
}

// appliedTopologies are the Kueue documents of the Topologies profiles
// place pods by, in name order, each followed by the ResourceFlavors
// placed by it whose node labels one of those profiles' node selectors
// holds: the pools the tenant's pods land on. A flavor of another pool
// (one a team has to itself, say) is left out; a run's manifests depend on
// the Topology alone, and the policy asks only that some flavor places
// pods by it. nil for none.
func appliedTopologies(p *Policy, profiles []Profile) []any {
	var names []string
	for _, pr := range profiles {
		if pr.Topology != "" && p.Topologies[pr.Topology] != nil && !slices.Contains(names, pr.Topology) {
			names = append(names, pr.Topology)
		}
	}
	slices.Sort(names)
	var docs []any
	for _, name := range names {
		t := p.Topologies[name]
		levels := make([]map[string]string, len(t.Levels))
		for i, l := range t.Levels {
			levels[i] = map[string]string{"nodeLabel": l.NodeLabel}
		}
		docs = append(docs, map[string]any{"apiVersion": kueueAPIVersion, "kind": "Topology",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"levels": levels}})
		for _, f := range t.Flavors {
			pool := labels.SelectorFromSet(f.NodeLabels)
			if slices.ContainsFunc(profiles, func(pr Profile) bool { return pr.Topology == name && pool.Matches(labels.Set(pr.NodeSelector)) }) {
				docs = append(docs, map[string]any{"apiVersion": kueueAPIVersion, "kind": "ResourceFlavor",
					"metadata": map[string]any{"name": f.Name}, "spec": map[string]any{"topologyName": name, "nodeLabels": f.NodeLabels}})
			}
		}
	}
	return docs
}

// kueueAPIVersion is the Kueue API the documents AppliedTo writes are of.
const kueueAPIVersion = "kueue.x-k8s.io/v1beta2"
