package impact

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/taugrid/taugrid/policy"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// quotaKey names one quota: a resource of a flavor of a ClusterQueue.
type quotaKey struct{ ClusterQueue, Flavor, Resource string }

// quota is what a ClusterQueue declares for one resource of one flavor;
// Borrowing is nil when borrowing is unlimited.
type quota struct {
	Nominal   resource.Quantity
	Borrowing *resource.Quantity
}

func (q quota) String() string {
	if q.Borrowing == nil || q.Borrowing.IsZero() {
		return q.Nominal.String()
	}
	return fmt.Sprintf("%s (+%s borrowable)", q.Nominal.String(), q.Borrowing.String())
}

// group is one resource group of a ClusterQueue: the resources it covers
// and its flavors, in the order Kueue tries them.
type group struct {
	Resources []string
	Flavors   []string
}

// clusterQueue is what the preview reads of a declared ClusterQueue.
type clusterQueue struct {
	Name, Cohort string
	Held         bool
	Groups       []group
	Quotas       map[quotaKey]quota
}

// clusterQueues are the policy's declared ClusterQueues by name, read
// once per policy: a preview asks for them for every run it judges.
// Callers only read the map.
func clusterQueues(p *Policy) map[string]*clusterQueue {
	p.readQueues.Do(func() { p.queues = readClusterQueues(p) })
	return p.queues
}

func readClusterQueues(p *Policy) map[string]*clusterQueue {
	out := map[string]*clusterQueue{}
	for _, u := range p.objects("ClusterQueue") {
		cq := &clusterQueue{Name: u.GetName(), Quotas: map[quotaKey]quota{}}
		cq.Cohort, _, _ = unstructured.NestedString(u.Object, "spec", "cohortName")
		stop, _, _ := unstructured.NestedString(u.Object, "spec", "stopPolicy")
		cq.Held = stop != "" && stop != "None"
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
		for _, g := range groups {
			cq.Groups = append(cq.Groups, readGroup(cq, policy.AsMap(g)))
		}
		out[cq.Name] = cq
	}
	return out
}

func readGroup(cq *clusterQueue, g map[string]any) group {
	var gr group
	gr.Resources, _, _ = unstructured.NestedStringSlice(g, "coveredResources")
	flavors, _, _ := unstructured.NestedSlice(g, "flavors")
	for _, f := range flavors {
		fm := policy.AsMap(f)
		name, _, _ := unstructured.NestedString(fm, "name")
		gr.Flavors = append(gr.Flavors, name)
		resources, _, _ := unstructured.NestedSlice(fm, "resources")
		for _, r := range resources {
			rm := policy.AsMap(r)
			rname, _, _ := unstructured.NestedString(rm, "name")
			q := quota{Nominal: quantity(rm["nominalQuota"])}
			if b, ok := rm["borrowingLimit"]; ok {
				bq := quantity(b)
				q.Borrowing = &bq
			}
			cq.Quotas[quotaKey{cq.Name, name, rname}] = q
		}
	}
	return gr
}

// quantity parses a quota LoadQueues already checked.
func quantity(v any) resource.Quantity {
	q, err := resource.ParseQuantity(fmt.Sprint(v))
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

// capacity is the most of a resource of a flavor a workload of cq can be
// given: its nominal quota plus what it may borrow, which without a limit
// is what the rest of its cohort holds.
func capacity(cqs map[string]*clusterQueue, cq *clusterQueue, k quotaKey) resource.Quantity {
	q := cq.Quotas[k]
	total := q.Nominal.DeepCopy()
	switch {
	case cq.Cohort == "":
	case q.Borrowing != nil:
		total.Add(*q.Borrowing)
	default:
		for _, other := range cqs {
			if other.Name != cq.Name && other.Cohort == cq.Cohort {
				total.Add(other.Quotas[quotaKey{other.Name, k.Flavor, k.Resource}].Nominal)
			}
		}
	}
	return total
}

// flavorLabels are the nodeLabels of the declared ResourceFlavors; a
// flavor absent from the map is not declared. Read once per policy, as
// clusterQueues; callers only read the map.
func flavorLabels(p *Policy) map[string]map[string]string {
	p.readFlavors.Do(func() { p.flavors = readFlavorLabels(p) })
	return p.flavors
}

func readFlavorLabels(p *Policy) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, u := range p.objects("ResourceFlavor") {
		l, _, _ := unstructured.NestedStringMap(u.Object, "spec", "nodeLabels")
		out[u.GetName()] = l
	}
	return out
}

// admission says why a run's workload could never be admitted from its
// LocalQueue under p, or "" when it could: the LocalQueue and ClusterQueue
// exist, the queue is not held, and for each resource group the run asks
// of, one flavor matches its node selector and could hold all it asks.
func admission(p *Policy, r Run) string {
	cqName := p.clusterQueueOf(r.Namespace, r.Queue)
	if cqName == "" {
		return fmt.Sprintf("LocalQueue %s/%s is not declared", r.Namespace, r.Queue)
	}
	cqs := clusterQueues(p)
	cq := cqs[cqName]
	switch {
	case cq == nil:
		return fmt.Sprintf("ClusterQueue %s (of LocalQueue %s/%s) is not declared", cqName, r.Namespace, r.Queue)
	case cq.Held:
		return fmt.Sprintf("ClusterQueue %s is held (spec.stopPolicy)", cqName)
	}
	asked := counted(r.Requests)
	for _, res := range slices.Sorted(maps.Keys(asked)) {
		res := string(res)
		if !slices.ContainsFunc(cq.Groups, func(g group) bool { return slices.Contains(g.Resources, res) }) {
			return fmt.Sprintf("asks for %s, which ClusterQueue %s does not cover", res, cqName)
		}
	}
	labels := flavorLabels(p)
	for _, g := range cq.Groups {
		if why := fitGroup(cqs, cq, g, asked, labels, r.NodeSelector); why != "" {
			return why
		}
	}
	return ""
}

// fitGroup says why no flavor of g can hold the run, or "".
func fitGroup(cqs map[string]*clusterQueue, cq *clusterQueue, g group, asked corev1.ResourceList, labels map[string]map[string]string, sel map[string]string) string {
	var wants []string
	for _, res := range g.Resources {
		if _, ok := asked[corev1.ResourceName(res)]; ok {
			wants = append(wants, res)
		}
	}
	if len(wants) == 0 {
		return ""
	}
	var why []string
	for _, f := range g.Flavors {
		fl, declared := labels[f]
		if !declared {
			why = append(why, fmt.Sprintf("flavor %s is not declared", f))
			continue
		}
		if k, ok := conflict(fl, sel); ok {
			why = append(why, fmt.Sprintf("flavor %s has %s=%s, the run selects %s=%s", f, k, fl[k], k, sel[k]))
			continue
		}
		short := ""
		for _, res := range wants {
			limit := capacity(cqs, cq, quotaKey{cq.Name, f, res})
			if want := asked[corev1.ResourceName(res)]; want.Cmp(limit) > 0 {
				short = fmt.Sprintf("asks %s %s, flavor %s can give at most %s", want.String(), res, f, limit.String())
				break
			}
		}
		if short == "" {
			return ""
		}
		why = append(why, short)
	}
	return fmt.Sprintf("ClusterQueue %s: %s", cq.Name, strings.Join(why, "; "))
}

// counted drops the resources Kueue is not asked about here: zero
// requests, and TauGrid's own taugrid.dev/ resources, which the controller
// adds to the queues it applies.
func counted(rl corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range rl {
		if !v.IsZero() && !strings.HasPrefix(string(k), "taugrid.dev/") {
			out[k] = v
		}
	}
	return out
}

// conflict finds a label both sides set to different values.
func conflict(a, b map[string]string) (string, bool) {
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if v, ok := b[k]; ok && v != a[k] {
			return k, true
		}
	}
	return "", false
}
