package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// validateProfilePlacement checks each profile's topology, required
// multi-node placement and MIG profiles against what kueue/ declares.
func validateProfilePlacement(c *checker, p *Policy) {
	for i, pr := range p.Profiles {
		at := fmt.Sprintf("profiles[%d]", i)
		topo := p.Topologies[pr.Topology]
		switch {
		case pr.Topology != "" && topo == nil:
			c.errorf(at+".topology", "no Topology %q is declared under %s/; declared: %s", pr.Topology, kueueDir, declared(p.Topologies))
		case topo != nil && len(topo.Flavors) == 0:
			c.errorf(at+".topology", "no ResourceFlavor under %s/ places pods by Topology %q (spec.topologyName), so Kueue would admit none of this profile's GPU runs; remove topology: to place them without it (docs/platform.md, \"Switching topology placement off and on\")", kueueDir, pr.Topology)
		}
		if need := pr.MultiNodePlacement; need != "" {
			ask, ok := parsePlacement(need)
			switch {
			case !ok || ask.mode != PlacementRequired:
				c.errorf(at+".multi_node_placement", "%q: expected same-<level>, such as same-block", need)
			case topo == nil:
				c.errorf(at+".multi_node_placement", "needs the profile's topology; set profiles[].topology")
			case topo.Depth(ask.level) < 0:
				c.errorf(at+".multi_node_placement", "topology %s has no level %q; expected one of: %s", topo.Name, ask.level, strings.Join(topo.Names(), ", "))
			}
		}
		seen := map[string]bool{}
		for j, m := range pr.MIGProfiles {
			f := fmt.Sprintf("%s.mig_profiles[%d]", at, j)
			switch {
			case !migProfileRE.MatchString(m):
				c.errorf(f, "invalid MIG profile %q; expected a name such as 1g.18gb", m)
			case seen[m]:
				c.errorf(f, "%q is listed twice", m)
			}
			seen[m] = true
		}
	}
}

// validateTenantMIG checks that every MIG profile a tenant lists is offered
// by a compute profile the tenant may use.
func validateTenantMIG(c *checker, p *Policy) {
	for i, t := range p.Tenants {
		for j, m := range t.MIGProfiles {
			offered := slices.ContainsFunc(p.Profiles, func(pr Profile) bool { return t.mayUse(pr.Name) && slices.Contains(pr.MIGProfiles, m) })
			if !offered {
				c.errorf(fmt.Sprintf("tenants[%d].mig_profiles[%d]", i, j), "no profile tenant %s may use offers MIG profile %q (profiles[].mig_profiles)", t.Name, m)
			}
		}
	}
}

func declared(ts map[string]*PlatformTopology) string {
	if len(ts) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(ts)), ", ")
}
