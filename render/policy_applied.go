package render

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// AppliedTo is the part of the policy that applies to one tenant's runs,
// as policy files that LoadPolicy reads back and RenderConfig renders
// from exactly as from the whole: the tenant itself, the profiles it may
// use, and the platform-wide rules (images, priorities, limits, pod
// security). Other tenants, the profiles only they may use (whose
// ingress peers may name their namespaces) and the worker clusters are
// left out: an evidence bundle a team reads, or hands to an auditor, shows
// nothing of another team. The policy commit and Digest name the whole.
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
	out := make(map[string][]byte, len(parts))
	for name, v := range parts {
		data, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("writing the policy's %s for tenant %s: %w", name, tenant, err)
		}
		out[name] = data
	}
	return out, nil
}
