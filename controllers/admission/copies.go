package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// prebuiltWorkloadLabel is the label MultiKueue puts on the copy of a Job
// it creates on a worker, naming the workload it made there first (Kueue's
// pkg/controller/constants, not part of its API module).
const prebuiltWorkloadLabel = "kueue.x-k8s.io/prebuilt-workload-name"

// decideCopy is decide on a MultiKueue worker. MultiKueue copies the
// manager's workload to the workers once the manager reserves quota for
// it, and creates its Job or RayJob on the worker that admitted it only
// after that admission. So the worker's workload is judged first: it
// must be the manager's, unchanged, and the manager's must pass the check
// as at home. Once a Job or RayJob owns it on the worker (a workload
// requeued there, or one whose Job someone made ahead of MultiKueue), that
// must be MultiKueue's copy of the manager's, unchanged since render once
// MultiKueue's own edits are undone.
func (c *Check) decideCopy(ctx context.Context, wl *kueue.Workload) (verdict, error) {
	home, v, err := c.dispatchedWorkload(ctx, wl)
	if home == nil {
		return *v, err
	}
	if len(wl.OwnerReferences) == 0 {
		atHome := &Check{APIReader: c.ManagerAPIReader, Manager: c.Manager, Clock: c.Clock}
		v, err := atHome.decide(ctx, home)
		if err != nil || v.state != kueue.CheckStateReady {
			return v, err
		}
		v.message = "TauGrid policy: dispatched by the manager cluster, where " + strings.TrimPrefix(v.message, "TauGrid policy: ")
		return v, nil
	}
	return chain(ctx, &subject{wl: wl}, "%s %s is the manager's copy of what was rendered for run %s under policy commit %s, unchanged since (%s)",
		c.copiedByMultiKueue,
		c.dispatchedByTheManager,
		c.ownedByARun,
		recordedByTheRun,
		runStillWanted,
		unchangedSinceDispatch,
	)
}

// dispatchedWorkload is the manager's workload that wl, on a worker, is
// the copy of: the same namespace and name, the same spec (MultiKueue
// adds only its preemption gates). A workload made on the worker by hand,
// or by Kueue for a Job made there, has none.
func (c *Check) dispatchedWorkload(ctx context.Context, wl *kueue.Workload) (*kueue.Workload, *verdict, error) {
	home := &kueue.Workload{}
	err := c.ManagerAPIReader.Get(ctx, client.ObjectKeyFromObject(wl), home) // whole: the cache slims pod templates
	if apierrors.IsNotFound(err) {
		return nil, rejected("created outside TauGrid: the manager cluster dispatched no workload %s to worker %s", wl.Name, c.Worker), nil
	}
	if err != nil {
		return nil, &verdict{}, err
	}
	if differ := specDifferences(home.Spec, wl.Spec); len(differ) > 0 {
		return nil, rejected("workload %s on worker %s differs from the one the manager dispatched: %s", wl.Name, c.Worker, strings.Join(differ, ", ")), nil
	}
	return home, nil, nil
}

// specDifferences names the parts of a worker's workload spec that are
// not the manager's: each pod set by name, the other fields by theirs.
// MultiKueue's preemption gates are its own.
func specDifferences(home, copied kueue.WorkloadSpec) []string {
	home.PreemptionGates, copied.PreemptionGates = nil, nil
	if equality.Semantic.DeepEqual(home, copied) {
		return nil
	}
	var out []string
	for i, ps := range copied.PodSets {
		j := slices.IndexFunc(home.PodSets, func(h kueue.PodSet) bool { return h.Name == ps.Name })
		if j < 0 || !equality.Semantic.DeepEqual(home.PodSets[j], ps) {
			out = append(out, fmt.Sprintf("podSets[%s]", copied.PodSets[i].Name))
		}
	}
	if len(home.PodSets) != len(copied.PodSets) && len(out) == 0 {
		out = append(out, "podSets")
	}
	home.PodSets, copied.PodSets = nil, nil
	if !equality.Semantic.DeepEqual(home, copied) {
		out = append(out, "its queue, priority or other fields")
	}
	return out
}

// copiedByMultiKueue: the worker's workload must belong to a Job or
// RayJob that MultiKueue made there (it carries the origin label).
func (c *Check) copiedByMultiKueue(ctx context.Context, s *subject) (*verdict, error) {
	owner, kind, v, err := ownerOf(ctx, c.APIReader, s.wl)
	if owner == nil {
		return v, err
	}
	if _, dispatched := owner.GetLabels()[kueue.MultiKueueOriginLabel]; !dispatched {
		return rejected("created outside TauGrid: %s %s was made on worker %s, not dispatched from the manager cluster", kind, owner.GetName(), c.Worker), nil
	}
	s.copy, s.kind = owner, kind
	return nil, nil
}

// dispatchedByTheManager: the manager must hold the object the copy was
// made from, under the same kind, namespace and name. A label says
// nothing by itself: anyone who can create a Job on the worker can write
// it.
func (c *Check) dispatchedByTheManager(ctx context.Context, s *subject) (*verdict, error) {
	var owner client.Object = &batchv1.Job{}
	if _, ray := s.copy.(*rayv1.RayJob); ray {
		owner = &rayv1.RayJob{}
	}
	err := c.ManagerAPIReader.Get(ctx, client.ObjectKey{Namespace: s.copy.GetNamespace(), Name: s.copy.GetName()}, owner)
	if apierrors.IsNotFound(err) {
		return rejected("created outside TauGrid: the manager cluster dispatched no %s %s", s.kind, s.copy.GetName()), nil
	}
	if err != nil {
		return nil, err
	}
	s.owner = owner
	return nil, nil
}

// unchangedSinceDispatch: the copy, with MultiKueue's own edits undone,
// must hash to what the manager's API server stored when TauGrid created
// the original. The original itself may since have changed in ways that
// do not reach the worker (Kueue writes the flavor's node selector into
// the manager's copy when it admits there).
func unchangedSinceDispatch(_ context.Context, s *subject) (*verdict, error) {
	return sameAsRendered(s, asDispatched(s.copy, s.owner), "%s %s on this worker differs from what TauGrid rendered: %s")
}

// asDispatched undoes on a worker's copy what MultiKueue and the
// worker's API server change when MultiKueue copies a Job or RayJob
// (Kueue's job and ray MultiKueue adapters): the labels naming the
// prebuilt workload and the origin go, spec.managedBy comes back (it is
// cleared so that the worker's controller runs the copy), and for a Job
// the controller UID in its selector and pod labels is the original's
// again. Nothing else may differ.
func asDispatched(copied, original client.Object) client.Object {
	out := copied.DeepCopyObject().(client.Object)
	labels := maps.Clone(out.GetLabels())
	delete(labels, prebuiltWorkloadLabel)
	delete(labels, kueue.MultiKueueOriginLabel)
	out.SetLabels(labels)
	from, to := string(copied.GetUID()), string(original.GetUID())
	switch x := out.(type) {
	case *batchv1.Job:
		if o, ok := original.(*batchv1.Job); ok {
			x.Spec.ManagedBy = o.Spec.ManagedBy
		}
		if x.Spec.Selector != nil {
			replaceValue(x.Spec.Selector.MatchLabels, from, to)
		}
		replaceValue(x.Spec.Template.Labels, from, to)
	case *rayv1.RayJob:
		if o, ok := original.(*rayv1.RayJob); ok {
			x.Spec.ManagedBy = o.Spec.ManagedBy
		}
	}
	return out
}

// replaceValue sets to every value of m that is from.
func replaceValue(m map[string]string, from, to string) {
	for k, v := range m {
		if v == from && from != "" {
			m[k] = to
		}
	}
}
