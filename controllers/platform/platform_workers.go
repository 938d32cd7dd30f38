package platform

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// WorkersDir, under kueue/, holds each worker's own Kueue objects:
// kueue/workers/<name>/*.yaml replace, by kind and name, the copies of the
// manager's objects the worker gets (a ClusterQueue with the worker's own
// quota, say).
const WorkersDir = "workers"

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=admissionchecks;multikueueconfigs;multikueueclusters,verbs=get;list;watch;create;patch;delete

// dispatchKinds are the manager's MultiKueue objects the platform makes
// from clusters.yaml (never from kueue/): pruned like the queues once a
// worker or a dispatched ClusterQueue leaves it. The kubeconfig Secrets
// they name are the platform team's, never labelled, never pruned.
var dispatchKinds = []schema.GroupVersionKind{
	{Group: kueue.GroupVersion.Group, Version: kueue.GroupVersion.Version, Kind: "MultiKueueConfig"},
	{Group: kueue.GroupVersion.Group, Version: kueue.GroupVersion.Version, Kind: "AdmissionCheck"},
	{Group: kueue.GroupVersion.Group, Version: kueue.GroupVersion.Version, Kind: "MultiKueueCluster"},
}

// dispatch makes the ClusterQueues clusters.yaml names dispatch to its
// workers. Each worker is checked first (reachable, holding the PVCs,
// Secrets and service accounts its tenants use), every worker before
// any is written; then each gets its tenants' namespaces, LocalQueues,
// ClusterQueues, flavors and priorities; the manager's objects come back
// with the MultiKueue objects added and the ClusterQueues naming their
// check. Problems name clusters.yaml's line.
func (r *PlatformReconciler) dispatch(ctx context.Context, p *taugridv1.TauPlatform, lp *policy.LoadedPolicy, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	workers := lp.Policy.Clusters
	if len(workers) == 0 {
		return objs, nil
	}
	if r.MultiKueueNamespace == "" {
		return nil, workers[0].Refuse("", "this controller is not a MultiKueue manager: start it with --multikueue-namespace to dispatch to worker clusters")
	}
	var errs render.ErrorList
	plans := make([][]*unstructured.Unstructured, len(workers))
	conns := make([]client.Client, len(workers))
	for i, w := range workers {
		plan, problems := WorkerObjects(lp.Tree, objs, w)
		if len(problems) == 0 {
			conns[i], problems = r.preflight(ctx, lp.Policy, w, plan)
		}
		errs = append(errs, problems...)
		plans[i] = plan
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for i, w := range workers {
		for _, u := range plans[i] {
			labelPlatform(u, p)
			err := conns[i].Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(PlatformFieldManager), client.ForceOwnership)
			if err != nil {
				return nil, w.Refuse("", "worker %s: applying %s %s: %v", w.Name, u.GetKind(), qualifiedName(u), err)
			}
		}
	}
	return managerDispatch(workers, objs)
}

// labelPlatform marks an object as this platform's.
func labelPlatform(u *unstructured.Unstructured, p *taugridv1.TauPlatform) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[taugridv1.LabelPlatform] = p.Name
	labels[render.LabelManagedBy] = render.ManagedBy
	u.SetLabels(labels)
}

// WorkerObjects is what worker w holds: the ClusterQueues dispatched to
// it (no cohort, no admission check but TauGrid's policy check: the
// worker admits on its own quota what TauGrid dispatched), the policy
// check itself,
// the LocalQueues that submit to them and their namespaces, every flavor
// and priority class; each replaced by the worker's own declaration in
// kueue/workers/<name>/, if any; and, in each of those namespaces, the
// policy that closes run pods to strangers until their fence arrives.
func WorkerObjects(tree fs.FS, objs []*unstructured.Unstructured, w render.WorkerCluster) ([]*unstructured.Unstructured, render.ErrorList) {
	var errs render.ErrorList
	cqs := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "ClusterQueue" && w.Dispatches(u.GetName()) {
			cqs[u.GetName()] = true
		}
	}
	for j, q := range w.ClusterQueues {
		if !cqs[q] {
			errs = append(errs, w.Refuse(fmt.Sprintf("cluster_queues[%d]", j), "ClusterQueue %q is not declared in %s/", q, policy.QueuesDir))
		}
	}
	namespaces := map[string]bool{}
	for _, u := range objs {
		if cq, _, _ := unstructured.NestedString(u.Object, "spec", "clusterQueue"); u.GetKind() == "LocalQueue" && cqs[cq] {
			namespaces[u.GetNamespace()] = true
		}
	}
	var plan []*unstructured.Unstructured
	for _, u := range objs {
		switch kind := u.GetKind(); {
		case kind == "ClusterQueue" && cqs[u.GetName()]:
			c := u.DeepCopy()
			unstructured.RemoveNestedField(c.Object, "spec", "cohortName")
			unstructured.RemoveNestedField(c.Object, "spec", "admissionChecksStrategy")
			withoutCohortLimits(c)
			plan = append(plan, c)
		case kind == "AdmissionCheck" && isPolicyCheck(u):
			plan = append(plan, u.DeepCopy())
		case kind == "LocalQueue" && namespaces[u.GetNamespace()], kind == "Namespace" && namespaces[u.GetName()],
			kind == "ResourceFlavor", kind == "WorkloadPriorityClass":
			plan = append(plan, u.DeepCopy())
		}
	}
	own, err := workerDeclared(tree, w.Name)
	if err != nil {
		return nil, append(errs, w.Refuse("name", "%v", err))
	}
	for _, o := range own {
		i := slices.IndexFunc(plan, func(u *unstructured.Unstructured) bool {
			return u.GetKind() == o.GetKind() && qualifiedName(u) == qualifiedName(o)
		})
		if i < 0 {
			plan = append(plan, o)
		} else {
			plan[i] = o
		}
	}
	if err := withWorkerPolicyCheck(plan); err != nil {
		return nil, append(errs, w.Refuse("name", "%v", err))
	}
	slices.SortStableFunc(plan, func(a, b *unstructured.Unstructured) int { return policy.KindOrder(a) - policy.KindOrder(b) })
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) { // after the namespaces they go in
		closed, err := closedToStrangers(ns)
		if err != nil {
			return nil, append(errs, w.Refuse("name", "%v", err))
		}
		plan = append(plan, closed)
	}
	return plan, errs
}

// workerDeclared reads kueue/workers/<name>/*.yaml.
func workerDeclared(tree fs.FS, name string) ([]*unstructured.Unstructured, error) {
	return policy.ReadQueueDir(tree, path.Join(policy.QueuesDir, WorkersDir, name), policy.CheckQuotas)
}

// preflight reaches worker w and checks it holds what the tenants whose
// namespaces it gets use: their PVCs, the Secrets they name exactly, their
// service accounts. TauGrid applies namespaces and queues, never data or
// credentials; only names are read (no Secret's contents).
func (r *PlatformReconciler) preflight(ctx context.Context, pol *render.Policy, w render.WorkerCluster, plan []*unstructured.Unstructured) (client.Client, render.ErrorList) {
	c, err := clusters.Connect(ctx, r.Client, r.MultiKueueNamespace, w.KubeconfigSecret, r.Scheme())
	if err != nil {
		return nil, render.ErrorList{w.Refuse("kubeconfig_secret", "worker %s cannot be reached: %v", w.Name, err)}
	}
	var errs render.ErrorList
	for _, u := range plan {
		t := pol.TenantForNamespace(u.GetName())
		if u.GetKind() != "Namespace" || t == nil {
			continue
		}
		for _, need := range tenantNeeds(t) {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(need.kind))
			switch err := c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: need.name}, m); {
			case apierrors.IsNotFound(err):
				errs = append(errs, w.Refuse("", "tenant %s uses %s %s, which worker %s lacks in namespace %s: create it there before dispatching to this worker",
					t.Name, need.kind, need.name, w.Name, t.Namespace))
			case err != nil:
				return nil, append(errs, w.Refuse("kubeconfig_secret", "worker %s cannot be reached: %v", w.Name, err))
			}
		}
	}
	return c, errs
}

// need is an object, by kind and name, a tenant's runs use.
type need struct{ kind, name string }

// tenantNeeds are the objects a tenant's runs use in its namespace: its
// PVCs, the Secrets it names exactly (a glob names none in particular),
// its service account.
func tenantNeeds(t *render.Tenant) []need {
	var needs []need
	for _, p := range t.PVCs {
		needs = append(needs, need{"PersistentVolumeClaim", p})
	}
	for _, s := range t.Secrets {
		if !strings.ContainsAny(s, `*?[\`) {
			needs = append(needs, need{"Secret", s})
		}
	}
	if t.ServiceAccount != "" {
		needs = append(needs, need{"ServiceAccount", t.ServiceAccount})
	}
	return needs
}

// managerDispatch is the manager's objects with what dispatches: a
// MultiKueueCluster per worker, an AdmissionCheck and MultiKueueConfig per
// dispatched ClusterQueue, and that ClusterQueue naming its check (the manager admits nothing itself).
func managerDispatch(workers []render.WorkerCluster, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var typed []runtime.Object
	to := map[string][]string{}
	for _, w := range workers {
		typed = append(typed, clusters.Cluster(clusters.Worker{Name: w.Name, Secret: w.KubeconfigSecret}))
		for _, q := range w.ClusterQueues {
			to[q] = append(to[q], w.Name)
		}
	}
	out := make([]*unstructured.Unstructured, 0, len(objs)+len(typed)+2*len(to))
	for _, q := range slices.Sorted(maps.Keys(to)) {
		check, config := clusters.Dispatch(q, to[q])
		typed = append(typed, check, config)
	}
	for _, o := range typed {
		u, err := shared.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	for _, u := range objs {
		if u.GetKind() != "ClusterQueue" || to[u.GetName()] == nil {
			out = append(out, u)
			continue
		}
		d := u.DeepCopy()
		rules, _, _ := unstructured.NestedSlice(d.Object, "spec", "admissionChecksStrategy", "admissionChecks")
		rules = append(rules, map[string]any{"name": clusters.CheckName(u.GetName())})
		if err := unstructured.SetNestedSlice(d.Object, rules, "spec", "admissionChecksStrategy", "admissionChecks"); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", u.GetName(), err)
		}
		out = append(out, d)
	}
	return out, nil
}

// withoutCohortLimits drops what only a cohort gives meaning to (Kueue
// refuses borrowing and lending limits on a ClusterQueue without one).
func withoutCohortLimits(cq *unstructured.Unstructured) {
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	for _, g := range groups {
		flavors, _, _ := unstructured.NestedSlice(policy.AsMap(g), "flavors")
		for _, f := range flavors {
			resources, _, _ := unstructured.NestedSlice(policy.AsMap(f), "resources")
			for _, r := range resources {
				delete(policy.AsMap(r), "borrowingLimit")
				delete(policy.AsMap(r), "lendingLimit")
			}
			_ = unstructured.SetNestedSlice(policy.AsMap(f), resources, "resources")
		}
		_ = unstructured.SetNestedSlice(policy.AsMap(g), flavors, "flavors")
	}
	_ = unstructured.SetNestedSlice(cq.Object, groups, "spec", "resourceGroups")
}

// isPolicyCheck: u is TauGrid's policy AdmissionCheck.
func isPolicyCheck(u *unstructured.Unstructured) bool {
	c, _, _ := unstructured.NestedString(u.Object, "spec", "controllerName")
	return u.GetKind() == "AdmissionCheck" && c == taugridv1.PolicyCheckController
}

// withWorkerPolicyCheck puts TauGrid's policy check, when the plan has
// it, on every ClusterQueue of a worker's plan, the worker's own
// declarations included: the manager's other checks (MultiKueue's)
// are the manager's alone, and no queue of the worker admits what TauGrid
// did not dispatch.
func withWorkerPolicyCheck(plan []*unstructured.Unstructured) error {
	i := slices.IndexFunc(plan, isPolicyCheck)
	if i < 0 {
		return nil
	}
	name := plan[i].GetName()
	for j, u := range plan {
		if u.GetKind() != "ClusterQueue" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "admissionChecksStrategy", "admissionChecks")
		if slices.ContainsFunc(rules, func(r any) bool { return policy.AsMap(r)["name"] == name }) {
			continue
		}
		c := u.DeepCopy() // own declarations are the loaded tree's
		if err := unstructured.SetNestedSlice(c.Object, append(rules, map[string]any{"name": name}), "spec", "admissionChecksStrategy", "admissionChecks"); err != nil {
			return fmt.Errorf("ClusterQueue %s: %w", u.GetName(), err)
		}
		plan[j] = c
	}
	return nil
}
