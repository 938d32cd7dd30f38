package placement

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// HostLevel is the name of the kubernetes.io/hostname level.
const HostLevel = "host"

// Level is one level of a topology: the name tau.yaml uses for it
// (same-<name>) and the node label whose values are its domains.
type Level struct {
	Name      string
	NodeLabel string
}

// Topology is a Kueue Topology as TauGrid reads it from the platform repo:
// its levels from the widest (a block, say) to the narrowest (a host).
type Topology struct {
	Name   string
	Levels []Level
}

// LevelName is the name researchers use for a level: kubernetes.io/hostname
// is "host"; any other label is the last word of its name, after the last
// '/', '.' or '-' (example.com/topology-rack is "rack",
// cloud.google.com/gce-topology-subblock is "subblock", nvidia.com/gpu.clique
// is "clique").
func LevelName(nodeLabel string) string {
	if nodeLabel == corev1.LabelHostname {
		return HostLevel
	}
	return strings.ToLower(nodeLabel[strings.LastIndexAny(nodeLabel, "/.-")+1:])
}

// NewTopology names the levels of a Kueue Topology's node labels, widest
// first. It refuses what Kueue refuses (no level, more than 16, a label
// twice, hostname anywhere but last) and two labels that would have the
// same name.
func NewTopology(name string, nodeLabels []string) (*Topology, error) {
	switch {
	case len(nodeLabels) == 0:
		return nil, fmt.Errorf("topology %s has no levels; list 1 to 16 node labels, widest first", name)
	case len(nodeLabels) > 16:
		return nil, fmt.Errorf("topology %s has %d levels; Kueue allows at most 16", name, len(nodeLabels))
	}
	t := &Topology{Name: name}
	seen := map[string]string{}
	for i, l := range nodeLabels {
		if l == corev1.LabelHostname && i != len(nodeLabels)-1 {
			return nil, fmt.Errorf("topology %s: %s must be the lowest (last) level, found at level %d of %d", name, l, i+1, len(nodeLabels))
		}
		n := LevelName(l)
		if n == "" {
			return nil, fmt.Errorf("topology %s: level %d has no node label", name, i+1)
		}
		if prev, dup := seen[n]; dup {
			return nil, fmt.Errorf("topology %s: levels %s and %s would both be called %q in tau.yaml (same-%s); use node labels whose last words differ", name, prev, l, n, n)
		}
		seen[n] = l
		t.Levels = append(t.Levels, Level{Name: n, NodeLabel: l})
	}
	return t, nil
}

// Level returns the level tau.yaml calls name, or false.
func (t *Topology) Level(name string) (Level, bool) {
	for _, l := range t.Levels {
		if l.Name == name {
			return l, true
		}
	}
	return Level{}, false
}

// Depth is a level's index, widest first; -1 when the topology lacks it.
func (t *Topology) Depth(name string) int {
	for i, l := range t.Levels {
		if l.Name == name {
			return i
		}
	}
	return -1
}

// Names are the placements a run may ask for on this topology, narrowest
// first: same-host, same-rack, same-block.
func (t *Topology) Names() []string {
	out := make([]string, 0, len(t.Levels))
	for i := len(t.Levels) - 1; i >= 0; i-- {
		out = append(out, "same-"+t.Levels[i].Name)
	}
	return out
}

// MissingLevels lists, for each level label of the topology, the nodes
// that lack it (in the order given), for a platform check that a Topology
// matches the nodes it describes.
func (t *Topology) MissingLevels(nodes []*corev1.Node) map[string][]string {
	missing := map[string][]string{}
	for _, l := range t.Levels {
		for _, n := range nodes {
			if _, ok := n.Labels[l.NodeLabel]; !ok {
				missing[l.NodeLabel] = append(missing[l.NodeLabel], n.Name)
			}
		}
	}
	return missing
}
