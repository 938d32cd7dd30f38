package render

import (
	"maps"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/placement"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kueue's Topology-Aware Scheduling annotations on pod templates.
const (
	AnnotationRequiredTopology      = "kueue.x-k8s.io/podset-required-topology"
	AnnotationPreferredTopology     = "kueue.x-k8s.io/podset-preferred-topology"
	AnnotationUnconstrainedTopology = "kueue.x-k8s.io/podset-unconstrained-topology"
	AnnotationPodSetGroup           = "kueue.x-k8s.io/podset-group-name"
)

// PlacementMode is how strictly a run's pods are kept together.
type PlacementMode string

// The placement modes: all pods in one domain of a level, that if
// possible, or anywhere the topology has room.
const (
	PlacementRequired  PlacementMode = "required"
	PlacementPreferred PlacementMode = "preferred"
	PlacementAny       PlacementMode = "any"
)

// Placement is a run's resolved placement on its profile's topology.
// A zero Placement (no Topology) renders no TAS annotation: the profile's
// flavor has no topology, or the run's pods ask for no GPU.
type Placement struct {
	Topology *placement.Topology
	Level    placement.Level // for required and preferred
	Mode     PlacementMode
}

// placementAsk is compute.placement parsed: any, same-<level> or
// prefer-same-<level>.
type placementAsk struct {
	mode  PlacementMode
	level string
}

func parsePlacement(s string) (placementAsk, bool) {
	if s == "any" {
		return placementAsk{mode: PlacementAny}, true
	}
	if l, ok := strings.CutPrefix(s, "prefer-same-"); ok && l != "" {
		return placementAsk{mode: PlacementPreferred, level: l}, true
	}
	if l, ok := strings.CutPrefix(s, "same-"); ok && l != "" {
		return placementAsk{mode: PlacementRequired, level: l}, true
	}
	return placementAsk{}, false
}

// validatePlacementFields checks compute.placement and compute.mig on their
// own; the profile decides later what they may be.
func validatePlacementFields(c *checker, cfg *Config) {
	cp := &cfg.Compute
	if cp.Placement != "" {
		if _, ok := parsePlacement(cp.Placement); !ok {
			c.errorf("compute.placement", "unknown placement %q; expected any, same-<level> or prefer-same-<level> (such as same-rack), with the levels the platform's topology names", cp.Placement)
		}
	}
	if cp.MIG == "" {
		return
	}
	switch {
	case !migProfileRE.MatchString(cp.MIG):
		c.errorf("compute.mig", "invalid MIG profile %q; expected a name such as 1g.18gb", cp.MIG)
	case c.set("compute.gpus") && cp.GPUs != nil && *cp.GPUs > 0:
		c.errorf("compute.mig", "a pod asks either whole GPUs (compute.gpus: %d) or one MIG slice (compute.mig: %s), not both: remove one", *cp.GPUs, cp.MIG)
	case cfg.Engine == EngineRayJob:
		c.errorf("compute.mig", "MIG slices are for single-pod Job runs; not allowed with engine rayjob")
	case cp.Nodes > 1:
		c.errorf("compute.mig", "a MIG slice cannot span nodes; remove compute.nodes (%d) or ask whole GPUs", cp.Nodes)
	}
}

// resolvePlacement applies the profile's MIG profiles and topology to the
// run: which slice it gets, which level keeps its pods together, and what
// the profile requires of multi-node runs.
func resolvePlacement(c *checker, pol *Policy, p *Plan) {
	cp, pr := &p.Config.Compute, p.Profile
	if cp.MIG != "" {
		resolveMIG(c, p)
	}
	ask, asked := parsePlacement(cp.Placement)
	if cp.Placement != "" && !asked {
		return // reported by validation
	}
	topo := pol.Topologies[pr.Topology]
	p.policyTopology = topo
	switch {
	case topo == nil && asked && ask.mode != PlacementAny:
		c.errorf("compute.placement", "profile %q places pods by no topology, so %s cannot be honoured; use a profile with a topology, or compute.placement: any", pr.Name, cp.Placement)
		return
	case topo == nil:
		return
	case p.GPUs == 0 && p.MIG == "":
		if asked && ask.mode != PlacementAny {
			c.errorf("compute.placement", "this run asks for no GPU; placement is for GPU pods (CPU-only pods are placed anywhere)")
		}
		return // CPU-only pods carry no TAS annotation
	}
	if need := pr.MultiNodePlacement; need != "" && p.pods() > 1 {
		req, _ := parsePlacement(need)
		if !asked {
			ask, asked = req, true
		} else if ask.mode != PlacementRequired || topo.Depth(ask.level) < topo.Depth(req.level) {
			c.errorf("compute.placement", "profile %q requires every multi-node run in one %s (%s, or narrower); %s is looser", pr.Name, req.level, need, cp.Placement)
			return
		}
	}
	p.Placement = Placement{Topology: topo.Topology, Mode: PlacementAny}
	if !asked || ask.mode == PlacementAny {
		return
	}
	level, ok := topo.Level(ask.level)
	if !ok {
		c.errorf("compute.placement", "topology %s of profile %q has no level %q; expected one of: any, %s (or prefer-same-<level>)", topo.Name, pr.Name, ask.level, strings.Join(topo.Names(), ", "))
		return
	}
	if level.Name == placement.HostLevel && p.Engine == EngineJob && p.Nodes > 1 && ask.mode == PlacementRequired {
		c.errorf("compute.placement", "a multi-node run has one pod per host, so its %d nodes cannot share a host; ask %s or wider", p.Nodes, topo.Names()[min(1, len(topo.Names())-1)])
		return
	}
	p.Placement.Level, p.Placement.Mode = level, ask.mode
}

func resolveMIG(c *checker, p *Plan) {
	pr, t := p.Profile, p.Tenant
	allowed := slices.DeleteFunc(slices.Clone(pr.MIGProfiles), func(m string) bool {
		return len(t.MIGProfiles) > 0 && !slices.Contains(t.MIGProfiles, m)
	})
	if !slices.Contains(allowed, p.Config.Compute.MIG) {
		offered := "none"
		if len(allowed) > 0 {
			offered = strings.Join(allowed, ", ")
		}
		c.errorf("compute.mig", "MIG profile %s is not one tenant %s may use on profile %q; it may use: %s (profiles[].mig_profiles and tenants[].mig_profiles in the platform repo)",
			p.Config.Compute.MIG, t.Name, pr.Name, offered)
		return
	}
	p.MIG, p.GPUs = p.Config.Compute.MIG, 0
}

// pods is how many pods of the run ask for GPUs.
func (p *Plan) pods() int {
	if p.Engine == EngineRayJob {
		return p.Workers
	}
	return p.Nodes
}

// topologyAnnotations are the TAS annotations of the run's GPU pods; group
// names a PodSet group (a Ray head and its workers) kept in one domain.
func (p *Plan) topologyAnnotations(group string) map[string]string {
	pl := p.Placement
	switch {
	case pl.Topology == nil:
		return nil
	case pl.Mode == PlacementRequired:
		return withGroup(map[string]string{AnnotationRequiredTopology: pl.Level.NodeLabel}, group)
	case pl.Mode == PlacementPreferred:
		return withGroup(map[string]string{AnnotationPreferredTopology: pl.Level.NodeLabel}, group)
	}
	return map[string]string{AnnotationUnconstrainedTopology: "true"}
}

func withGroup(m map[string]string, group string) map[string]string {
	if group != "" {
		m[AnnotationPodSetGroup] = group
	}
	return m
}

// podAnnotations are the profile's pod annotations plus extra.
func (p *Plan) podAnnotations(extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return p.Profile.PodAnnotations
	}
	out := maps.Clone(p.Profile.PodAnnotations)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, extra)
	return out
}

// onePerHost keeps a multi-node run's pods on distinct hosts.
func onePerHost(a *corev1.Affinity, run string, attempt string) *corev1.Affinity {
	out := &corev1.Affinity{}
	if a != nil {
		out = a.DeepCopy()
	}
	out.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey:   corev1.LabelHostname,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelRun: run, LabelAttempt: attempt}},
	}}}
	return out
}

// addHostSlot asks one host slot for a pod of a multi-node run placed by
// topology: the pod anti-affinity keeps such pods apart for kube-scheduler,
// the slot keeps them apart for Kueue's TAS, which reads no affinity and
// would otherwise assign two of them one host (taugridv1.ResourceHostSlot).
func (p *Plan) addHostSlot(c *corev1.Container) {
	if p.Placement.Topology == nil {
		return
	}
	one := resourceFromInt(1)
	c.Resources.Requests[taugridv1.ResourceHostSlot] = one
	c.Resources.Limits[taugridv1.ResourceHostSlot] = one
}

// addMIG gives the container one slice of the run's MIG profile.
func (p *Plan) addMIG(c *corev1.Container) {
	if p.MIG == "" {
		return
	}
	name := corev1.ResourceName(MIGResource(p.MIG))
	one := resourceFromInt(1)
	c.Resources.Requests[name] = one
	c.Resources.Limits[name] = one
}

// PlacementRequest is what the run's GPU pods ask of the nodes, for the
// check that they could ever fit (placement.Check); false when the
// profile places pods by no topology, or the pods ask for no GPU.
func (p *Plan) PlacementRequest() (placement.Request, bool) {
	if p.Placement.Topology == nil {
		return placement.Request{}, false
	}
	per := corev1.ResourceList{corev1.ResourceCPU: p.CPU, corev1.ResourceMemory: p.Memory}
	if p.GPUs > 0 {
		per[p.Profile.GPUResource] = resourceFromInt(p.GPUs)
	}
	if p.MIG != "" {
		per[corev1.ResourceName(MIGResource(p.MIG))] = resourceFromInt(1)
	}
	sel := maps.Clone(p.Profile.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	if t := p.policyTopology; t != nil && len(t.Flavors) == 1 {
		maps.Copy(sel, t.Flavors[0].NodeLabels)
	}
	r := placement.Request{Pods: p.pods(), PerPod: per, Selector: sel, Topology: p.Placement.Topology,
		OnePerHost: p.Engine == EngineJob && p.Nodes > 1}
	if r.OnePerHost {
		r.HostSlot = taugridv1.ResourceHostSlot
	}
	if p.Placement.Mode == PlacementRequired {
		r.Level = p.Placement.Level.Name
	}
	return r, true
}

// PlacementField is the tau.yaml field a placement refusal points at.
func (p *Plan) PlacementField() string {
	if p.Placement.Mode == PlacementRequired {
		return "compute.placement"
	}
	if p.Engine == EngineRayJob {
		return "compute.workers"
	}
	return "compute.nodes"
}

// String is the placement as tau.yaml writes it.
func (pl Placement) String() string {
	switch pl.Mode {
	case PlacementRequired:
		return "same-" + pl.Level.Name
	case PlacementPreferred:
		return "prefer-same-" + pl.Level.Name
	case PlacementAny:
		return "any"
	}
	return ""
}

// rayPodSetGroup groups a RayJob's head and worker PodSets, so that Kueue
// places them in one domain.
const rayPodSetGroup = "ray"

// submitterTopology lets the Ray job submitter, which only talks to the
// head, go anywhere on the topology.
func (p *Plan) submitterTopology() map[string]string {
	if p.Placement.Topology == nil {
		return nil
	}
	return map[string]string{AnnotationUnconstrainedTopology: "true"}
}
