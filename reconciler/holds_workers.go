package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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
	releasePatch = client.RawPatch(types.StrategicMergePatchType, fmt.Appendf(nil, `{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, taugridv1.FinalizerEvidence))
)

// holdKey is one attempt of one run.
type holdKey struct {
	run     types.UID
	attempt int
}

// holdOnWorker holds the current attempt's Job on the worker it was
// dispatched to, once per attempt (a controller restart patches it once
// more, which changes nothing). The worker's Job appears a moment after
// the dispatch; until then, and while the worker cannot be reached, the
// next look tries again. It never fails the run's reconcile: a run is
// followed whether or not its evidence is held.
func (r *RunReconciler) holdOnWorker(ctx context.Context, run *taugridv1.TauRun, cluster string) {
	w := run.Status.Workload
	n := len(run.Status.Attempts)
	if cluster == "" || r.Clusters == nil || r.Evidence == nil || w == nil || n == 0 || run.Status.Attempts[n-1].EndTime != nil {
		return
	}
	key := holdKey{run: run.UID, attempt: n}
	held := memoOf(&r.held)
	if _, ok := held.get(key); ok {
		return
	}
	switch err := patchWorkerJob(ctx, r.Clusters, cluster, heldObject(w.Kind, run.Namespace, w.Name), true); {
	case err == nil:
		held.put(key, struct{}{})
	case !apierrors.IsNotFound(err):
		log.FromContext(ctx).Info("cannot hold the attempt's Job on its worker yet", "cluster", cluster, "job", w.Name, "error", err.Error())
	}
}

// forgetHolds drops the entries of the run's ended attempts: the
// evidence controller releases what they hold.
func (r *RunReconciler) forgetHolds(run *taugridv1.TauRun, ended []int) {
	held := memoOf(&r.held)
	for _, n := range ended {
		held.forget(holdKey{run: run.UID, attempt: n})
	}
}

// releaseOnWorker lets go of attempt n's Job on its worker once its bundle
// is stored (or the store failed: a hold must not wait on the store). A
// worker that cannot be reached keeps the hold until the janitor's next
// sweep; a Job already gone was never held or is released.
func (e *EvidenceRecorder) releaseOnWorker(ctx context.Context, run *taugridv1.TauRun, n int) {
	if e.Clusters == nil || n < 1 || n > len(run.Status.Attempts) {
		return
	}
	a := run.Status.Attempts[n-1]
	if a.Cluster == "" || a.Workload == "" {
		return
	}
	// The ended attempt's kind: the run's workload says it while it is
	// the current one; between attempts it is gone, so both are tried (a
	// worker without KubeRay has no RayJob to release).
	kinds := []string{"Job", "RayJob"}
	if w := run.Status.Workload; w != nil && w.Name == a.Workload && w.Kind != "" {
		kinds = []string{w.Kind}
	}
	var err error
	for _, kind := range kinds {
		if err = patchWorkerJob(ctx, e.Clusters, a.Cluster, heldObject(kind, run.Namespace, a.Workload), false); !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			break
		}
	}
	if client.IgnoreNotFound(err) != nil && !meta.IsNoMatchError(err) {
		log.FromContext(ctx).Info("cannot release the attempt's Job on its worker; the janitor will", "cluster", a.Cluster, "job", a.Workload, "error", err.Error())
	}
}

// heldObject is the object that holds a dispatched attempt's evidence on
// its worker: its RayJob for a Ray run, else its Job.
func heldObject(kind, namespace, name string) client.Object {
	var o client.Object = &batchv1.Job{}
	if kind == "RayJob" {
		o = &rayv1.RayJob{}
	}
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

// patchWorkerJob holds (or releases) the attempt's object on worker
// cluster.
func patchWorkerJob(ctx context.Context, workers clusters.Locator, cluster string, held client.Object, hold bool) error {
	p, err := workers.PodsOf(ctx, cluster)
	if err != nil {
		return err
	}
	if p.Client == nil {
		return fmt.Errorf("worker cluster %s: no client to write with", cluster)
	}
	if err := setHold(ctx, p.Client, held, hold); err != nil {
		return fmt.Errorf("worker cluster %s: %s %s/%s: %w", cluster, heldKind(held), held.GetNamespace(), held.GetName(), err)
	}
	return nil
}

// setHold adds or removes FinalizerEvidence on held, leaving every other
// finalizer alone: a Job by a strategic merge patch (no read); a RayJob,
// a custom resource the API server patches only by JSON merge (which
// replaces the whole list), by reading it and patching the list with the
// read's resourceVersion, so a finalizer KubeRay adds meanwhile is a
// Conflict, tried again at the next look, never dropped.
func setHold(ctx context.Context, c client.Client, held client.Object, hold bool) error {
	if _, ray := held.(*rayv1.RayJob); !ray {
		patch := releasePatch
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

// heldKind names held's kind for a message.
func heldKind(held client.Object) string {
	if _, ray := held.(*rayv1.RayJob); ray {
		return "RayJob"
	}
	return "Job"
}

// ReasonStaleHold is the janitor's finding of a worker's Job held for an
// attempt whose run is gone, or whose bundle is sealed.
const ReasonStaleHold = "StaleEvidenceHold"

// staleHolds releases, on every MultiKueue worker, the Jobs TauGrid holds
// for evidence whose run is gone or no longer seals them (the evidence
// controller let go and the worker missed it): a hold never outlives its
// run. It releases in report mode too: the hold is TauGrid's own and
// holds no quota. A worker that cannot be read is left for the next
// sweep; the others are swept all the same.
func (j *Janitor) staleHolds(ctx context.Context) ([]Finding, error) {
	if j.Clusters == nil {
		return nil, nil
	}
	var mkcs kueue.MultiKueueClusterList
	switch err := j.Client.List(ctx, &mkcs); {
	case meta.IsNoMatchError(err):
		return nil, nil // no MultiKueue here
	case err != nil:
		return nil, err
	}
	var found []Finding
	for _, mkc := range mkcs.Items {
		f, err := j.staleHoldsOn(ctx, mkc.Name)
		if err != nil {
			j.Log.Info("cannot sweep the worker's evidence holds; leaving them for the next sweep", "cluster", mkc.Name, "error", err.Error())
		}
		found = append(found, f...)
	}
	return found, nil
}

// staleHoldsOn releases the stale holds of one worker.
func (j *Janitor) staleHoldsOn(ctx context.Context, cluster string) ([]Finding, error) {
	p, err := j.Clusters.PodsOf(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if p.Client == nil {
		return nil, fmt.Errorf("worker cluster %s: no client to write with", cluster)
	}
	var found []Finding
	for _, list := range []client.ObjectList{&batchv1.JobList{}, &rayv1.RayJobList{}} {
		err := p.Client.List(ctx, list, client.MatchingLabels{render.LabelManagedBy: render.ManagedBy})
		if meta.IsNoMatchError(err) {
			continue // no KubeRay on this worker: no RayJob is held there
		}
		if err != nil {
			return found, err
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return found, err
		}
		for _, o := range objs {
			f, err := j.releaseStale(ctx, p.Client, cluster, o.(client.Object))
			if err != nil {
				return found, err
			}
			if f != nil {
				found = append(found, *f)
			}
		}
	}
	return found, nil
}

// releaseStale releases held if its hold is stale, and says so.
func (j *Janitor) releaseStale(ctx context.Context, c client.Client, cluster string, held client.Object) (*Finding, error) {
	if !controllerutil.ContainsFinalizer(held, taugridv1.FinalizerEvidence) {
		return nil, nil
	}
	why, err := j.holdIsStale(ctx, held)
	if err != nil || why == "" {
		return nil, err
	}
	if err := setHold(ctx, c, held, false); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	f := Finding{Reason: ReasonStaleHold, Object: heldKind(held) + "/" + held.GetNamespace() + "/" + held.GetName(),
		Message: fmt.Sprintf("held on worker cluster %s for evidence, yet %s", cluster, why)}
	if j.Metrics != nil {
		j.Metrics.WithLabelValues(f.Reason, "released").Inc()
	}
	j.Log.Info("janitor finding", "reason", f.Reason, "object", f.Object, "action", "released", "message", f.Message)
	return &f, nil
}

// holdIsStale says why a worker's held Job is held for nothing, or "":
// its run is gone (or is another run of the same name), or its attempt
// ended and the run seals nothing any more.
func (j *Janitor) holdIsStale(ctx context.Context, job client.Object) (string, error) {
	run := &taugridv1.TauRun{}
	switch err := j.Client.Get(ctx, types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetLabels()[render.LabelRun]}, run); {
	case apierrors.IsNotFound(err):
		return "its run is gone", nil
	case err != nil:
		return "", err
	}
	n, _ := strconv.Atoi(job.GetLabels()[render.LabelAttempt]) // 0, so no attempt, when it is not a number
	if n < 1 || n > len(run.Status.Attempts) || run.Status.Attempts[n-1].Workload != job.GetName() {
		return "no attempt of its run is this Job", nil
	}
	if slices.Contains(endedAttempts(run), n) && !sealing(run) {
		return fmt.Sprintf("attempt %d ended and its evidence is sealed", n), nil
	}
	return "", nil
}
