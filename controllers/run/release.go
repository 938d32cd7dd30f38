package run

import (
	"context"
	"slices"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/shared"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=delete
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters,verbs=get;list;watch;delete

// releaseEnded frees what the run's ended attempts still hold: an ended
// run holds nothing. See release.
func (r *RunReconciler) releaseEnded(ctx context.Context, run *taugridv1.TauRun) error {
	ended := shared.EndedAttempts(run)
	if len(ended) == 0 {
		return nil
	}
	r.forgetHolds(run, ended)
	if err := r.release(ctx, run, func(attempt int) bool { return slices.Contains(ended, attempt) }); err != nil {
		return err
	}
	return r.unfenceOnWorkers(ctx, run)
}

// release deletes, for the attempts ended says, each Ray cluster and each
// pod that has not terminated. KubeRay deletes a finished RayJob's cluster
// itself, but not when TauGrid ends the attempt (a preemption, a deadline,
// a cancellation), and the cluster's pods go only when the garbage
// collector gets to them: TauGrid deletes both, explicitly, at once. Pods
// get their termination grace (a preempted run saves its checkpoint).
// Terminated pods hold nothing; they stay with the Job kept for the record.
func (r *RunReconciler) release(ctx context.Context, run *taugridv1.TauRun, ended func(attempt int) bool) error {
	ours := client.MatchingLabels{render.LabelRun: run.Name}
	var clusters rayv1.RayClusterList
	switch err := r.List(ctx, &clusters, client.InNamespace(run.Namespace), ours); {
	case meta.IsNoMatchError(err): // no KubeRay here, so no Ray clusters
	case err != nil:
		return err
	}
	for i := range clusters.Items {
		if c := &clusters.Items[i]; endedAttempt(c, ended) {
			if err := r.Delete(ctx, c, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(run.Namespace), ours); err != nil {
		return err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; endedAttempt(p, ended) && !shared.PodTerminated(p) {
			if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// endedAttempt reports an object of an ended attempt not yet being deleted.
func endedAttempt(o client.Object, ended func(attempt int) bool) bool {
	n, err := strconv.Atoi(o.GetLabels()[render.LabelAttempt])
	return err == nil && ended(n) && o.GetDeletionTimestamp().IsZero()
}

// reconcileEnded is all an ended run still needs: what it holds released
// (again, should a crash have come between its end and the release), and
// its RayJob, kept for the record without pods, deleted once the
// platform's ttl_after_finished has passed (a Job's own TTL does that for
// a Job). It reports when to look again.
func (r *RunReconciler) reconcileEnded(ctx context.Context, run *taugridv1.TauRun) (reconcile.Result, error) {
	if err := r.releaseEnded(ctx, run); err != nil {
		return reconcile.Result{}, err
	}
	w := run.Status.Workload
	if w == nil || w.Kind != "RayJob" {
		return reconcile.Result{}, nil
	}
	rj := &rayv1.RayJob{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: w.Name}, rj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	left, ok := recordLeft(rj, run, r.Clock.Now())
	switch {
	case !ok || !rj.DeletionTimestamp.IsZero():
		return reconcile.Result{}, nil
	case left > 0:
		return reconcile.Result{RequeueAfter: left}, nil
	}
	if err := r.Delete(ctx, rj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// recordLeft is how long an ended RayJob is still kept for the record:
// its AnnotationKeepAfterFinished from when it (or else the run) ended. It
// reports false for a RayJob that says nothing of keeping.
func recordLeft(rj *rayv1.RayJob, run *taugridv1.TauRun, now time.Time) (time.Duration, bool) {
	secs, err := strconv.Atoi(rj.Annotations[render.AnnotationKeepAfterFinished])
	if err != nil || secs < 0 {
		return 0, false
	}
	end := shared.Since(run, run.Status.Phase)
	if rj.Status.EndTime != nil {
		end = rj.Status.EndTime.Time
	}
	return max(0, end.Add(time.Duration(secs)*time.Second).Sub(now)), true
}
