package janitor

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

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
	if err := shared.SetHold(ctx, c, held, false); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	f := Finding{Reason: ReasonStaleHold, Object: shared.HeldKind(held) + "/" + held.GetNamespace() + "/" + held.GetName(),
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
	if slices.Contains(shared.EndedAttempts(run), n) && !shared.Sealing(run) {
		return fmt.Sprintf("attempt %d ended and its evidence is sealed", n), nil
	}
	return "", nil
}
