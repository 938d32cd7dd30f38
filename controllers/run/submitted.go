package run

import (
	"context"
	"fmt"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// submissionMemoTTL is how long a submission's status write is expected
// to take to reach the cache; a memo older than that is dropped, so a
// run whose cache never shows the write is looked at afresh.
const submissionMemoTTL = 30 * time.Second

// submission is, per run, the last attempt whose submission this process
// wrote to the run's status (RunReconciler.submitted). A reconcile working
// from a cached copy that does not show that attempt yet reads a copy
// older than its own write: submitting again would only be refused
// (AlreadyExists, then a Conflict on the status) after reading the tau
// file for nothing.
type submission struct {
	attempt int
	at      time.Time
}

// cacheLagsSubmission reports a run whose cached copy does not show the
// attempt this process last submitted for it and recorded: its Job or
// RayJob is created, and the cache has not caught up with the status.
func (r *RunReconciler) cacheLagsSubmission(run *taugridv1.TauRun) bool {
	subs := shared.MemoOf(&r.submitted)
	sub, ok := subs.Get(run.UID)
	switch {
	case !ok:
		return false
	case len(run.Status.Attempts) < sub.attempt && r.Clock.Now().Sub(sub.at) < submissionMemoTTL:
		return true
	}
	subs.Forget(run.UID) // the cache shows it (or never will): forget it
	return false
}

// announceSubmitted is called once the status that records the submission
// of w is stored: only then is "Submitted" true, so only then is the
// event emitted, and the submission remembered.
func (r *RunReconciler) announceSubmitted(run *taugridv1.TauRun, w client.Object) {
	shared.MemoOf(&r.submitted).Put(run.UID, submission{attempt: len(run.Status.Attempts), at: r.Clock.Now()})
	r.Recorder.Eventf(run, w, corev1.EventTypeNormal, ReasonSubmitted, "Submit", "submitted %s %s to queue %s",
		run.Status.Workload.Kind, w.GetName(), run.Status.Workload.Queue)
}

// leftoverWorkloads deletes the Kueue Workloads still controlled by an
// earlier object of the kind and name the attempt's workload is about to
// take (one TauGrid deleted as unrecorded), and reports the names of those
// left. Kueue matches a Job to its Workload by the Job's name, not its UID
// (jobframework.FindMatchingWorkloads): a Job made again while the old
// Workload stands would be handed its admission, and started under it,
// while the run waited for a Workload of its own that never comes. The
// namespace's Workloads are read from the cache, without copies, which
// costs no request; only a Workload found under the name costs a read of
// the kind from the API server, since the one standing may be the run's
// own, unrecorded, and its Workload then is its own too.
func (r *RunReconciler) leftoverWorkloads(ctx context.Context, namespace, kind string, owner client.Object) (left []string, err error) {
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var under []*kueue.Workload
	for i := range wls.Items {
		if ref := metav1.GetControllerOfNoCopy(&wls.Items[i]); ref != nil && ref.Kind == kind && ref.Name == owner.GetName() {
			under = append(under, &wls.Items[i])
		}
	}
	if len(under) == 0 {
		return nil, nil
	}
	live, ok := owner.DeepCopyObject().(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s %s: not an object", kind, owner.GetName())
	}
	var uid types.UID
	switch err := r.uncached().Get(ctx, types.NamespacedName{Namespace: namespace, Name: owner.GetName()}, live); {
	case err == nil:
		uid = live.GetUID()
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	for _, wl := range under {
		if metav1.GetControllerOfNoCopy(wl).UID == uid {
			continue
		}
		left = append(left, wl.Name)
		if wl.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, wl.DeepCopy()); client.IgnoreNotFound(err) != nil { // the cache's own copy is not written
				return left, fmt.Errorf("deleting the Workload %s of an earlier %s %s: %w", wl.Name, kind, owner.GetName(), err)
			}
		}
	}
	return left, nil
}
