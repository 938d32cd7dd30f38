package run

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// lostWorker is the worker cluster the current attempt was dispatched to
// if MultiKueue has since taken the attempt's Workload off it, else "".
// The Workload says so by an eviction for an admission check (its Evicted
// condition, or once Kueue readmits it, only the eviction its scheduling
// stats count) while it no longer names that worker. A Workload belongs
// to one attempt, so such an eviction ended that attempt.
func lostWorker(run *taugridv1.TauRun, wl *kueue.Workload) string {
	if run.Status.Workload == nil || wl == nil {
		return ""
	}
	was := run.Status.Workload.Cluster
	if was == "" || wl.Status.ClusterName != nil && *wl.Status.ClusterName == was {
		return ""
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason == kueue.WorkloadEvictedByAdmissionCheck {
		return was
	}
	if wl.Status.SchedulingStats != nil {
		for _, e := range wl.Status.SchedulingStats.Evictions {
			if e.Reason == kueue.WorkloadEvictedByAdmissionCheck && e.Count > 0 {
				return was
			}
		}
	}
	return ""
}

// workerLossReason says how the attempt lost its worker: unreachable (the
// read of its pods failed: workerErr), or taken off a worker that still
// answers (evicted there).
func workerLossReason(worker string, workerErr error) string {
	if workerErr != nil {
		return fmt.Sprintf("worker cluster %s stopped answering, and Kueue took the run off it after its worker-lost timeout", worker)
	}
	return fmt.Sprintf("Kueue took the run off worker cluster %s (its Workload was evicted there)", worker)
}

// recordWorkerLoss records on the current attempt that it lost its
// worker, before anything acts on it: once TauGrid deletes the attempt's
// job, the record is what every later look goes by.
func recordWorkerLoss(run *taugridv1.TauRun, worker string, workerErr error) {
	a := &run.Status.Attempts[len(run.Status.Attempts)-1]
	a.FailureClass, a.Reason = string(taugridv1.FailureWorkerLost), workerLossReason(worker, workerErr)
	a.Cluster = worker
}

// workerLossRecorded reports an attempt recorded as having lost its worker.
func workerLossRecorded(a *taugridv1.Attempt) bool {
	return a != nil && a.FailureClass == string(taugridv1.FailureWorkerLost)
}

// endWorkerLost ends an attempt recorded as having lost its worker and
// returns the run's message; its pods, on the lost worker, are not read.
func endWorkerLost(run *taugridv1.TauRun, now time.Time) (taugridv1.FailureClass, string) {
	a := &run.Status.Attempts[len(run.Status.Attempts)-1]
	if a.EndTime == nil {
		t := metav1.NewTime(now)
		a.EndTime = &t
	}
	return taugridv1.FailureWorkerLost, fmt.Sprintf("failed (%s): %s", taugridv1.FailureWorkerLost, a.Reason)
}

// unreachableMessage is a dispatched run's message while its worker does
// not answer: the phase stays what the cluster last showed. It says why
// in the client's words, without the request (never a credential: the
// worker's kubeconfig embeds them, and no error quotes it).
func unreachableMessage(worker string, err error) string {
	why := err.Error()
	var uerr *url.Error
	var nerr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) && nerr.Timeout():
		why = "its API did not answer in time"
	case errors.As(err, &uerr):
		why = uerr.Err.Error()
	}
	return fmt.Sprintf("cannot reach worker cluster %s to follow the run: %s; its phase is as last seen", worker, why)
}

// unreachableRecheck is how soon a run whose worker did not answer is
// looked at again: each look may wait out a call timeout.
const unreachableRecheck = 5 * WorkerResync

// workerUnreachable keeps a run whose worker does not answer as it last
// was, says so, and looks again later.
func (r *RunReconciler) workerUnreachable(run *taugridv1.TauRun, obs Observed) (reconcile.Result, error) {
	r.setPhase(run, run.Status.Phase, unreachableMessage(obs.Cluster, obs.WorkerErr))
	return reconcile.Result{RequeueAfter: unreachableRecheck}, nil
}
