package run

import (
	"context"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/taugrid/taugrid/controllers/shared"
)

// WorkerFieldManager is the field manager of what the run reconciler
// applies in a worker cluster.
const WorkerFieldManager = "taugrid-run"

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get

// companions are what an attempt renders beside its workload, named as
// its workload, that its pods need where they run: the NetworkPolicy
// fencing them and a multi-node Job's headless Service. MultiKueue copies
// only the Job or RayJob to the worker.
func companions() []client.Object {
	return []client.Object{&networkingv1.NetworkPolicy{}, &corev1.Service{}}
}

// fenceOnWorker copies the attempt's companions from the manager to the
// worker its Workload was just dispatched to, before the cluster is
// recorded: a failure leaves it unrecorded, so the next look tries
// again. A pod may start on the worker a resync before its fence does.
func (r *RunReconciler) fenceOnWorker(ctx context.Context, run *taugridv1.TauRun, cluster string) error {
	w := run.Status.Workload
	if cluster == "" || r.Clusters == nil || w == nil || w.Cluster == cluster {
		return nil
	}
	p, err := r.Clusters.PodsOf(ctx, cluster)
	if err != nil {
		return err
	}
	if p.Client == nil {
		return fmt.Errorf("worker cluster %s: no client to fence the run's pods with", cluster)
	}
	for _, o := range companions() {
		switch err := r.uncached().Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: w.Name}, o); {
		case apierrors.IsNotFound(err):
			continue // not rendered for this workload (a Service for one pod)
		case err != nil:
			return err
		}
		u, err := workerCopy(o, r.Scheme)
		if err != nil {
			return err
		}
		if err := p.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(WorkerFieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("worker cluster %s: applying %s %s: %w", cluster, u.GetKind(), w.Name, err)
		}
	}
	return nil
}

// uncached reads the manager around the cache (no informer for the
// kinds only a dispatch reads).
func (r *RunReconciler) uncached() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// workerCopy is o as the worker gets it: its labels and spec, no owner
// (the run is the manager's), no server fields, no assigned cluster IPs
// but a headless Service's None.
func workerCopy(o client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(o, scheme)
	if err != nil {
		return nil, err
	}
	c := o.DeepCopyObject().(client.Object)
	c.GetObjectKind().SetGroupVersionKind(gvk)
	c.SetResourceVersion("")
	c.SetUID("")
	c.SetOwnerReferences(nil)
	c.SetManagedFields(nil)
	c.SetGeneration(0)
	if svc, ok := c.(*corev1.Service); ok && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	} else if ok {
		svc.Spec.ClusterIPs = nil
	}
	return shared.ToUnstructured(c)
}

// unfenceOnWorkers deletes, once a dispatched run has ended, the
// companions its attempts left on their workers (nothing there owns
// them). A worker that cannot be reached, or was removed, is left: its
// copies select no pod once MultiKueue has removed the attempt's.
func (r *RunReconciler) unfenceOnWorkers(ctx context.Context, run *taugridv1.TauRun) error {
	if r.Clusters == nil || !run.Status.Phase.Final() {
		return nil
	}
	for _, a := range run.Status.Attempts {
		if a.Cluster == "" {
			continue
		}
		p, err := r.Clusters.PodsOf(ctx, a.Cluster)
		if err != nil || p.Client == nil {
			continue
		}
		for _, o := range companions() {
			o.SetNamespace(run.Namespace)
			o.SetName(a.Workload)
			if err := p.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("worker cluster %s: deleting %T %s: %w", a.Cluster, o, a.Workload, err)
			}
		}
	}
	return nil
}
