package shared

import (
	"context"
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// A dispatched attempt's Job or RayJob is held on its worker
// (FinalizerEvidence) from the run reconciler's first look at it until its
// bundle is sealed: MultiKueue deletes the worker's object with background
// propagation when the manager's Workload finishes, so what it owns stays
// while it does: a Job's pods; a RayJob's submitter Job and pod, whose log
// is the driver's (KubeRay itself deletes the Ray cluster when the job
// ends, on a worker as on one cluster).

// holdPatch adds FinalizerEvidence to a Job and releasePatch removes it:
// strategic merge patches, which merge into metadata.finalizers (patchStrategy
// merge) and leave every other finalizer alone. Both are idempotent; on a
// Job that does not exist they fail NotFound and create nothing.
var (
	holdPatch    = client.RawPatch(types.StrategicMergePatchType, fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, taugridv1.FinalizerEvidence))
	ReleasePatch = client.RawPatch(types.StrategicMergePatchType, fmt.Appendf(nil, `{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, taugridv1.FinalizerEvidence))
)

// HeldObject is the object that holds a dispatched attempt's evidence on
// its worker: its RayJob for a Ray run, else its Job.
func HeldObject(kind, namespace, name string) client.Object {
	var o client.Object = &batchv1.Job{}
	if kind == "RayJob" {
		o = &rayv1.RayJob{}
	}
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

// PatchWorkerJob holds (or releases) the attempt's object on worker
// cluster.
func PatchWorkerJob(ctx context.Context, workers clusters.Locator, cluster string, held client.Object, hold bool) error {
	p, err := workers.PodsOf(ctx, cluster)
	if err != nil {
		return err
	}
	if p.Client == nil {
		return fmt.Errorf("worker cluster %s: no client to write with", cluster)
	}
	if err := SetHold(ctx, p.Client, held, hold); err != nil {
		return fmt.Errorf("worker cluster %s: %s %s/%s: %w", cluster, HeldKind(held), held.GetNamespace(), held.GetName(), err)
	}
	return nil
}

// SetHold adds or removes FinalizerEvidence on held, leaving every other
// finalizer alone: a Job by a strategic merge patch (no read); a RayJob,
// a custom resource the API server patches only by JSON merge (which
// replaces the whole list), by reading it and patching the list with the
// read's resourceVersion, so a finalizer KubeRay adds meanwhile is a
// Conflict, tried again at the next look, never dropped.
func SetHold(ctx context.Context, c client.Client, held client.Object, hold bool) error {
	if _, ray := held.(*rayv1.RayJob); !ray {
		patch := ReleasePatch
		if hold {
			patch = holdPatch
		}
		return c.Patch(ctx, held, patch)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(held), held); err != nil {
		return err
	}
	base := held.DeepCopyObject().(client.Object)
	if changed := hold && controllerutil.AddFinalizer(held, taugridv1.FinalizerEvidence) ||
		!hold && controllerutil.RemoveFinalizer(held, taugridv1.FinalizerEvidence); !changed {
		return nil
	}
	return c.Patch(ctx, held, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// HeldKind names held's kind for a message.
func HeldKind(held client.Object) string {
	if _, ray := held.(*rayv1.RayJob); ray {
		return "RayJob"
	}
	return "Job"
}
