package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Request is what a group of a run's identical pods needs of the nodes.
type Request struct {
	// Pods is how many pods must be placed.
	Pods int
	// PerPod is one pod's requests.
	PerPod corev1.ResourceList
	// Selector is what a node must be labelled with to be considered: the
	// profile's node selector and the flavor's node labels.
	Selector map[string]string
	// Topology and Level ask for every pod in one domain of that level
	// (a level name such as "rack"); with Level empty the pods may go
	// anywhere. A node counts only when it carries every level's label, as
	// Kueue's TAS counts it.
	Topology *Topology
	Level    string
	// OnePerHost places at most one pod on a node (multi-node torchrun).
	OnePerHost bool
	// HostSlot, with OnePerHost, is the extended resource each pod asks one
	// of and each node offers one of (tau-nodeagent advertises it): a node
	// without it holds none of the pods.
	HostSlot corev1.ResourceName
}

// Shortfall says why a request can never fit the cluster's nodes, even
// empty: the figures a researcher needs to change the request.
type Shortfall struct {
	Request Request
	// Matching is how many nodes match the selector and carry the levels.
	Matching int
	// Best is the most pods one domain (the whole cluster without a level)
	// can hold; BestDomain names that domain.
	Best       int
	BestDomain string
	// Unslotted is how many matching nodes offer no host slot.
	Unslotted int
}

func (s *Shortfall) Error() string {
	r := s.Request
	if s.Matching == 0 {
		return "no node matches this run's profile (" + describeSelector(r.Selector, r.Topology) + ")"
	}
	in, has := "", "the cluster has"
	if r.Level != "" {
		in = " in one " + r.Level
		has = fmt.Sprintf("the largest %s (%s) has", r.Level, s.BestDomain)
	}
	need := fmt.Sprintf("needs room for %d pods of %s%s", r.Pods, describe(r.PerPod), in)
	if r.OnePerHost {
		need = fmt.Sprintf("needs %d hosts with %s each%s, one pod per host", r.Pods, describe(r.PerPod), in)
	}
	switch {
	case s.Best == 0 && s.Unslotted == s.Matching:
		return need + fmt.Sprintf("; none of the %d matching nodes offers %s, which keeps such pods on distinct hosts: is tau-nodeagent running on them?", s.Matching, r.HostSlot)
	case s.Best == 0:
		return need + fmt.Sprintf("; none of the %d matching nodes has room for one", s.Matching)
	case r.OnePerHost:
		return fmt.Sprintf("%s; %s %d", need, has, s.Best)
	}
	return fmt.Sprintf("%s; %s room for %d", need, has, s.Best)
}

// Check reports whether the request's pods could all be placed on these
// nodes if they were empty: nil when they could, else the shortfall. It
// reads allocatable capacity only (what is busy now frees later), so a nil
// answer does not promise the run starts now, and a Shortfall means it
// never would. Nodes are only read.
func Check(nodes []*corev1.Node, r Request) *Shortfall {
	depth := -1
	if r.Topology != nil && r.Level != "" {
		if depth = r.Topology.Depth(r.Level); depth < 0 {
			return &Shortfall{Request: r}
		}
	}
	perDomain := map[string]*int{} // pointers: a lookup by []byte key does not allocate
	matching, unslotted := 0, 0
	var key []byte
	for _, n := range nodes {
		if !matches(n, r) {
			continue
		}
		matching++
		fit := fits(n.Status.Allocatable, r.PerPod)
		if r.OnePerHost {
			fit = min(fit, 1)
		}
		if slot := n.Status.Allocatable[r.HostSlot]; r.OnePerHost && r.HostSlot != "" && slot.CmpInt64(1) < 0 {
			fit = 0
			unslotted++
		}
		if fit == 0 {
			continue
		}
		key = key[:0]
		for i := 0; i <= depth; i++ {
			if i > 0 {
				key = append(key, '/')
			}
			key = append(key, n.Labels[r.Topology.Levels[i].NodeLabel]...)
		}
		if c, ok := perDomain[string(key)]; ok {
			*c += fit
		} else {
			c = new(int)
			*c = fit
			perDomain[string(key)] = c
		}
	}
	s := &Shortfall{Request: r, Matching: matching, Unslotted: unslotted}
	for _, d := range slices.Sorted(maps.Keys(perDomain)) {
		if c := *perDomain[d]; c > s.Best {
			s.Best, s.BestDomain = c, d
		}
	}
	if matching > 0 && s.Best >= r.Pods {
		return nil
	}
	return s
}

// matches: the node carries the selector's labels and every level label.
func matches(n *corev1.Node, r Request) bool {
	for k, v := range r.Selector {
		if n.Labels[k] != v {
			return false
		}
	}
	if r.Topology != nil {
		for _, l := range r.Topology.Levels {
			if _, ok := n.Labels[l.NodeLabel]; !ok {
				return false
			}
		}
	}
	return true
}

// fits is how many pods of these requests the allocatable holds.
func fits(alloc, req corev1.ResourceList) int {
	best := -1
	for name, q := range req {
		want := q.MilliValue()
		if want <= 0 {
			continue
		}
		have, ok := alloc[name]
		if !ok {
			return 0
		}
		n := int(have.MilliValue() / want)
		if best < 0 || n < best {
			best = n
		}
	}
	if best < 0 {
		return 1 << 20 // asks nothing: any node holds it
	}
	return best
}

// describe writes requests as "8 nvidia.com/gpu, 48 cpu, 512Gi memory":
// extended resources first, then cpu and memory.
func describe(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for n := range l {
		if n != corev1.ResourceCPU && n != corev1.ResourceMemory {
			names = append(names, string(n))
		}
	}
	slices.Sort(names)
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := l[n]; ok {
			names = append(names, string(n))
		}
	}
	parts := make([]string, len(names))
	for i, n := range names {
		q := l[corev1.ResourceName(n)]
		parts[i] = q.String() + " " + n
	}
	return strings.Join(parts, ", ")
}

func describeSelector(sel map[string]string, t *Topology) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		parts = append(parts, k+"="+sel[k])
	}
	if t != nil {
		for _, l := range t.Levels {
			parts = append(parts, "label "+l.NodeLabel)
		}
	}
	if len(parts) == 0 {
		return "any node"
	}
	return "nodes with " + strings.Join(parts, ", ")
}
