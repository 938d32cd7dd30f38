package policy

import (
	"context"
	"sort"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// CheckFeasible refuses a run its ClusterQueue can never admit: a resource
// no flavor of the queue covers, or more than the queue could ever hold
// (nominal quota plus its borrowing limit). Queues that may borrow without
// a limit are given the benefit of the doubt. The error points at the tau
// file's field.
func CheckFeasible(ctx context.Context, r client.Reader, ns string, plan *render.Plan, objs []client.Object) error {
	lq := &kueue.LocalQueue{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: plan.Queue}, lq); err != nil {
		return client.IgnoreNotFound(err) // Kueue says so in the Workload's status
	}
	cq := &kueue.ClusterQueue{}
	if err := r.Get(ctx, types.NamespacedName{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		return client.IgnoreNotFound(err)
	}
	fields := map[corev1.ResourceName]string{corev1.ResourceCPU: "compute.cpu", corev1.ResourceMemory: "compute.memory", plan.Profile.GPUResource: "compute.gpus"}
	if plan.Engine == render.EngineRayJob {
		fields[plan.Profile.GPUResource] = "compute.gpus_per_worker"
	}
	if plan.MIG != "" {
		fields[corev1.ResourceName(render.MIGResource(plan.MIG))] = "compute.mig"
	}
	total := requests(objs)
	for _, name := range sortedResources(total) {
		want := total[name]
		capacity, covered, bounded := queueCapacity(cq, name)
		field := fields[name]
		if field == "" {
			field = "compute"
		}
		switch {
		case !covered:
			return plan.Config.ErrorAt(field, "ClusterQueue %s (queue %s) offers no %s: this run could never be admitted; pick a profile that has it", cq.Name, plan.Queue, name)
		case bounded && want.Cmp(capacity) > 0:
			return plan.Config.ErrorAt(field, "the run asks %s %s in all, more than ClusterQueue %s can ever hold (%s, nominal quota plus borrowing limit): it could never be admitted",
				want.String(), name, cq.Name, capacity.String())
		}
	}
	return checkPlacement(ctx, r, plan)
}

// queueCapacity is the most of a resource one flavor of the queue could
// give a workload.
func queueCapacity(cq *kueue.ClusterQueue, name corev1.ResourceName) (best resource.Quantity, covered, bounded bool) {
	bounded = true
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.Name != name {
					continue
				}
				covered = true
				c := r.NominalQuota.DeepCopy()
				switch {
				case r.BorrowingLimit != nil:
					c.Add(*r.BorrowingLimit)
				case cq.Spec.CohortName != "":
					bounded = false // may borrow whatever the cohort lends
				}
				if c.Cmp(best) > 0 {
					best = c
				}
			}
		}
	}
	return best, covered, bounded
}

// requests sums what the rendered workload asks of the queue: every pod's
// requests, times its count.
func requests(objs []client.Object) corev1.ResourceList {
	total := corev1.ResourceList{}
	add := func(spec *corev1.PodSpec, n int32) {
		for _, c := range spec.Containers {
			for name, q := range c.Resources.Requests {
				q = q.DeepCopy()
				for range n {
					cur := total[name]
					cur.Add(q)
					total[name] = cur
				}
			}
		}
	}
	for _, o := range objs {
		switch w := o.(type) {
		case *batchv1.Job:
			n := int32(1)
			if w.Spec.Parallelism != nil {
				n = *w.Spec.Parallelism
			}
			add(&w.Spec.Template.Spec, n)
		case *rayv1.RayJob:
			if rc := w.Spec.RayClusterSpec; rc != nil {
				add(&rc.HeadGroupSpec.Template.Spec, 1)
				for _, g := range rc.WorkerGroupSpecs {
					n := int32(1)
					if g.Replicas != nil {
						n = *g.Replicas
					}
					add(&g.Template.Spec, n)
				}
			}
		}
	}
	return total
}

func sortedResources(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}
