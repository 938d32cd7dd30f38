package impact

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/taugrid/taugrid/render"
)

// tenantNames are the tenants of either policy, sorted.
func tenantNames(old, new *Policy) []string {
	seen := map[string]bool{}
	for _, p := range []*Policy{old, new} {
		for _, t := range p.Tenants {
			seen[t.Name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// runsByTenant groups runs by the tenant that owns their namespace in
// either policy; runs of no tenant's namespace are no policy's business.
func runsByTenant(old, new *Policy, runs []Run) map[string][]Run {
	out := map[string][]Run{}
	for _, r := range runs {
		t := old.TenantForNamespace(r.Namespace)
		if t == nil {
			t = new.TenantForNamespace(r.Namespace)
		}
		if t != nil {
			out[t.Name] = append(out[t.Name], r)
		}
	}
	return out
}

// tenantImpact is what the change does to one tenant.
func tenantImpact(old, new *Policy, c Cluster, name string, runs []Run) TenantImpact {
	ot, nt := old.Tenant(name), new.Tenant(name)
	ti := TenantImpact{Tenant: name}
	ti.Quotas = quotaChanges(old, new, tenantQueues(old, ot, new, nt), c.Usage)
	ti.Removals = tenantRemovals(old, new, ot, nt)
	ti.Moves = queueMoves(old, new, ot, nt, c)
	urls := repositoryURLs(c)
	for _, r := range runs {
		if r.RepositoryURL == "" {
			r.RepositoryURL = urls[r.Namespace+"/"+r.Repository]
		}
		if ri, ok := judge(old, new, nt, r); ok {
			ti.Runs = append(ti.Runs, ri)
		} else {
			ti.Unchanged++
		}
	}
	return ti
}

// tenantQueues are the ClusterQueues the tenant's LocalQueues feed, under
// either policy.
func tenantQueues(old *Policy, ot *render.Tenant, new *Policy, nt *render.Tenant) []string {
	seen := map[string]bool{}
	for _, side := range []struct {
		p *Policy
		t *render.Tenant
	}{{old, ot}, {new, nt}} {
		if side.t == nil {
			continue
		}
		for _, q := range side.t.Queues {
			if cq := side.p.clusterQueueOf(side.t.Namespace, q); cq != "" {
				seen[cq] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// tenantRemovals are what the tenant's runs may use no more, or less of.
func tenantRemovals(old, new *Policy, ot, nt *render.Tenant) []Removal {
	if ot == nil {
		return nil
	}
	if nt == nil {
		return []Removal{{Kind: "tenant", Name: ot.Name, Detail: "removed from tenants.yaml; namespace " + ot.Namespace + " belongs to no tenant"}}
	}
	var out []Removal
	out = append(out, profileRemovals(old, new, ot, nt)...)
	for _, pr := range gone(old.AllowedPriorities(ot), new.AllowedPriorities(nt)) {
		out = append(out, Removal{Kind: "priority", Name: pr, Detail: removedOrWithheld(!hasPriority(new, pr), "priorities.yaml")})
	}
	for _, q := range gone(ot.Queues, nt.Queues) {
		out = append(out, Removal{Kind: "queue", Name: ot.Namespace + "/" + q, Detail: "no longer one of the tenant's queues"})
	}
	for _, pat := range gone(ot.Repositories, nt.Repositories) {
		out = append(out, Removal{Kind: "repository", Name: pat, Detail: "no longer one of the tenant's repository patterns"})
	}
	return out
}

// profileRemovals are the profiles the tenant loses, and those it keeps
// with less in them.
func profileRemovals(old, new *Policy, ot, nt *render.Tenant) []Removal {
	var out []Removal
	for _, pr := range old.Profiles {
		if !ot.MayUse(pr.Name) {
			continue
		}
		np := new.Profile(pr.Name)
		switch {
		case np == nil:
			out = append(out, Removal{Kind: "profile", Name: pr.Name, Detail: "removed from profiles.yaml"})
		case !nt.MayUse(pr.Name):
			out = append(out, Removal{Kind: "profile", Name: pr.Name, Detail: "no longer offered to the tenant"})
		default:
			if n := narrowed(&pr, np); n != "" {
				out = append(out, Removal{Kind: "profile", Name: pr.Name, Detail: n})
			}
		}
	}
	return out
}

// narrowed says how a profile gives less than before, or "".
func narrowed(o, n *render.Profile) string {
	var s []string
	if n.MaxGPUs < o.MaxGPUs {
		s = append(s, fmt.Sprintf("max_gpus %d → %d", o.MaxGPUs, n.MaxGPUs))
	}
	if n.MaxNodes < o.MaxNodes {
		s = append(s, fmt.Sprintf("max_nodes %d → %d", o.MaxNodes, n.MaxNodes))
	}
	if lost := gone(engines(o), engines(n)); len(lost) > 0 {
		s = append(s, "engines without "+strings.Join(lost, ", "))
	}
	if !maps.Equal(o.NodeSelector, n.NodeSelector) {
		s = append(s, "node_selector changed")
	}
	if o.GPUResource != n.GPUResource {
		s = append(s, fmt.Sprintf("gpu_resource %s → %s", o.GPUResource, n.GPUResource))
	}
	return strings.Join(s, ", ")
}

// engines a profile allows; none listed is both.
func engines(p *render.Profile) []string {
	if len(p.Engines) == 0 {
		return []string{string(render.EngineJob), string(render.EngineRayJob)}
	}
	var out []string
	for _, e := range p.Engines {
		out = append(out, string(e))
	}
	return out
}

func classOf(p *Policy, name string) string {
	for _, pr := range p.Priorities {
		if pr.Name == name {
			return pr.Class
		}
	}
	return ""
}

func hasPriority(p *Policy, name string) bool { return classOf(p, name) != "" }

func removedOrWithheld(removed bool, file string) string {
	if removed {
		return "removed from " + file
	}
	return "no longer offered to the tenant"
}

// gone are the elements of a that b lacks, in a's order.
func gone(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// queueMoves are the tenant's repositories whose runs go by default to
// another ClusterQueue than before.
func queueMoves(old, new *Policy, ot, nt *render.Tenant, c Cluster) []QueueMove {
	if ot == nil || nt == nil || len(ot.Queues) == 0 || len(nt.Queues) == 0 {
		return nil
	}
	before := ot.Queues[0] + " → ClusterQueue " + orNone(old.clusterQueueOf(ot.Namespace, ot.Queues[0]))
	after := nt.Queues[0] + " → ClusterQueue " + orNone(new.clusterQueueOf(nt.Namespace, nt.Queues[0]))
	if before == after {
		return nil
	}
	var out []QueueMove
	for _, repo := range c.Repositories {
		if repo.Namespace == nt.Namespace {
			out = append(out, QueueMove{Repository: repo.Name, Before: before, After: after})
		}
	}
	slices.SortFunc(out, func(a, b QueueMove) int { return strings.Compare(a.Repository, b.Repository) })
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func repositoryURLs(c Cluster) map[string]string {
	out := map[string]string{}
	for _, r := range c.Repositories {
		out[r.Namespace+"/"+r.Name] = r.Spec.URL
	}
	return out
}
