package impact

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// imageRemovals are the platform-wide narrowings: allow-list entries
// removed, digests newly required, and limits lowered, which every run's
// next resolve reads.
func imageRemovals(old, new *Policy) []Removal {
	var out []Removal
	for _, e := range gone(old.Images.Allow, new.Images.Allow) {
		out = append(out, Removal{Kind: "image", Name: e, Detail: "removed from images.yaml allow"})
	}
	if new.Images.RequireDigest && !old.Images.RequireDigest {
		out = append(out, Removal{Kind: "image", Name: "require_digest", Detail: "images must now be pinned by a digest"})
	}
	for _, l := range []struct {
		name     string
		old, new time.Duration
	}{
		{"max_run_time", old.Limits.MaxRunTime.Duration, new.Limits.MaxRunTime.Duration},
		{"max_queue_time", old.Limits.MaxQueueTime.Duration, new.Limits.MaxQueueTime.Duration},
	} {
		if l.new != 0 && (l.old == 0 || l.new < l.old) {
			out = append(out, Removal{Kind: "limit", Name: l.name, Detail: fmt.Sprintf("%s → %s; runs' limits are read again under the new policy", orUnset(l.old), l.new)})
		}
	}
	if new.Limits.MaxRetries < old.Limits.MaxRetries {
		out = append(out, Removal{Kind: "limit", Name: "max_retries", Detail: fmt.Sprintf("%d → %d", old.Limits.MaxRetries, new.Limits.MaxRetries)})
	}
	return out
}

func orUnset(d time.Duration) string {
	if d == 0 {
		return "unset"
	}
	return d.String()
}

// quotaChanges are the quotas of these ClusterQueues that differ.
func quotaChanges(old, new *Policy, queues []string, usage map[string]map[string]corev1.ResourceList) []QuotaChange {
	ob, nb := clusterQueues(old), clusterQueues(new)
	keys := map[quotaKey]bool{}
	for _, name := range queues {
		for _, side := range []map[string]*clusterQueue{ob, nb} {
			if cq := side[name]; cq != nil {
				for k := range cq.Quotas {
					keys[k] = true
				}
			}
		}
	}
	var out []QuotaChange
	for _, k := range slices.SortedFunc(maps.Keys(keys), compareKeys) {
		before, bok := quotaOf(ob, k)
		after, aok := quotaOf(nb, k)
		if bok == aok && (!bok || before.String() == after.String()) {
			continue
		}
		qc := QuotaChange{ClusterQueue: k.ClusterQueue, Flavor: k.Flavor, Resource: k.Resource}
		if bok {
			qc.Before = before.String()
		}
		if aok {
			qc.After = after.String()
		}
		if used, ok := usage[k.ClusterQueue][k.Flavor][corev1.ResourceName(k.Resource)]; ok {
			qc.InUse = used.String()
			qc.Below = !aok || after.Nominal.Cmp(used) < 0
		}
		out = append(out, qc)
	}
	return out
}

func quotaOf(cqs map[string]*clusterQueue, k quotaKey) (quota, bool) {
	cq := cqs[k.ClusterQueue]
	if cq == nil {
		return quota{}, false
	}
	q, ok := cq.Quotas[k]
	return q, ok
}

func compareKeys(a, b quotaKey) int {
	return strings.Compare(a.ClusterQueue+"\x00"+a.Flavor+"\x00"+a.Resource, b.ClusterQueue+"\x00"+b.Flavor+"\x00"+b.Resource)
}

// otherQuotas are the quota changes of ClusterQueues no tenant's
// LocalQueue feeds, in either policy (a cohort's lender, say).
func otherQuotas(old, new *Policy, usage map[string]map[string]corev1.ResourceList) []QuotaChange {
	fed := map[string]bool{}
	for _, p := range []*Policy{old, new} {
		for _, lq := range p.objects("LocalQueue") {
			fed[p.clusterQueueOf(lq.GetNamespace(), lq.GetName())] = true
		}
	}
	names := map[string]bool{}
	for _, p := range []*Policy{old, new} {
		for name := range clusterQueues(p) {
			if !fed[name] {
				names[name] = true
			}
		}
	}
	return quotaChanges(old, new, slices.Sorted(maps.Keys(names)), usage)
}

// uncoveredNodes are the nodes some flavor of old covers and no flavor of
// new does: Kueue would give no quota of them.
func uncoveredNodes(old, new *Policy, nodes []corev1.Node) []string {
	ol, nl := flavorLabels(old), flavorLabels(new)
	var out []string
	for _, n := range nodes {
		if covered(ol, n.Labels) && !covered(nl, n.Labels) {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// unservedFlavors are the ResourceFlavors new adds, or whose nodeLabels
// it changes, that no node carries: quota of them admits workloads whose
// pods no node can take.
func unservedFlavors(old, new *Policy, nodes []corev1.Node) []string {
	ol := flavorLabels(old)
	var out []string
	for name, labels := range flavorLabels(new) {
		if before, ok := ol[name]; ok && maps.Equal(before, labels) {
			continue
		}
		served := false
		for _, n := range nodes {
			if covered(map[string]map[string]string{name: labels}, n.Labels) {
				served = true
				break
			}
		}
		if !served {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// covered reports whether some flavor's nodeLabels all hold on a node.
func covered(flavors map[string]map[string]string, labels map[string]string) bool {
	for _, want := range flavors {
		ok := true
		for k, v := range want {
			if labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
