// Package audit is the audit controller: it appends every decision about
// a run (who requested and signed it, what it was rendered from, Kueue's
// admission, admission checks, preemption, retries, cancellation, the
// outcome) to its tenant's hash-chained audit log in the evidence store.
// It reads what the run controller and Kueue wrote and writes nothing to
// the API server.
package audit

import (
	"context"
	"regexp"
	"strconv"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// Appender is where decisions go: the tenant's audit log.
type Appender interface {
	Append(ctx context.Context, namespace string, entries []evidence.AuditEntry) (int, error)
}

// AuditReconciler appends each run's decisions, as its status and its
// Kueue Workloads show them, to its namespace's audit log. The log keeps
// which it holds, so a repeated reconcile or a restart writes nothing
// twice; it costs the API server no write.
type AuditReconciler struct {
	// Client reads runs and Workloads (the manager's cache).
	Client client.Reader
	Log    Appender
}

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// Reconcile records the run's decisions not yet in the log. A store that
// fails is transient: the error is returned and the rate limiter retries.
func (r *AuditReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	run := &taugridv1.TauRun{}
	if err := r.Client.Get(ctx, req.NamespacedName, run); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	o, err := r.observe(ctx, run)
	if err != nil {
		return reconcile.Result{}, err
	}
	_, err = r.Log.Append(ctx, run.Namespace, Decisions(o))
	return reconcile.Result{}, err
}

// observe reads the Workloads of the run's attempts and, for attempts
// Kueue preempted, what preempted them. Each attempt's Workloads are
// looked up by their Job or RayJob (shared.IndexWorkloadOwner), not found
// among every Workload of the namespace: this runs at every change of
// every run.
func (r *AuditReconciler) observe(ctx context.Context, run *taugridv1.TauRun) (Observed, error) {
	o := Observed{Run: run, Workloads: map[int]*kueue.Workload{}, Preemptors: map[int]Preemptor{}}
	for _, a := range run.Status.Attempts {
		if run.Status.Workload == nil || a.Workload == "" {
			continue
		}
		var wls kueue.WorkloadList
		if err := r.Client.List(ctx, &wls, client.InNamespace(run.Namespace),
			client.MatchingFields{shared.IndexWorkloadOwner: run.Status.Workload.Kind + "/" + a.Workload}); err != nil {
			return o, err
		}
		for i := range wls.Items {
			if name, n, ok := attemptOf(&wls.Items[i]); ok && name == run.Name {
				o.Workloads[n] = &wls.Items[i]
			}
		}
	}
	for _, a := range run.Status.Attempts {
		if a.Preemption == nil {
			continue
		}
		p, err := r.preemptor(ctx, a.Preemption.Message, run.Namespace)
		if err != nil {
			return o, err
		}
		o.Preemptors[a.Number] = p
	}
	return o, nil
}

// attemptOf is the run and attempt of a Workload controlled by a run's Job
// or RayJob, named <run>-<attempt>.
func attemptOf(wl *kueue.Workload) (string, int, bool) {
	ref := metav1.GetControllerOfNoCopy(wl)
	if ref == nil {
		return "", 0, false
	}
	run, ok := render.RunOfWorkload(ref.Name)
	if !ok {
		return "", 0, false
	}
	n, _ := strconv.Atoi(ref.Name[len(run)+1:])
	return run, n, true
}

// kueuePreemption picks the preemptor's job UID and Kueue's reason out of
// a Preempted condition's message, "Preempted to accommodate a workload
// (UID: …, JobUID: …) due to <reason>; preemptor path: …".
var kueuePreemption = regexp.MustCompile(`JobUID: ([^)]*)\) due to ([^;]*)`)

// preemptor describes what preempted a workload of namespace viewer, in
// words its team may read: another team's runs and namespaces are never
// named, only their priority.
func (r *AuditReconciler) preemptor(ctx context.Context, msg, viewer string) (Preemptor, error) {
	m := kueuePreemption.FindStringSubmatch(msg)
	if m == nil || m[1] == "" {
		return Preemptor{}, nil
	}
	p := Preemptor{Reason: m[2], Words: "a workload that is gone"}
	var wls kueue.WorkloadList
	if err := r.Client.List(ctx, &wls, client.MatchingLabels{shared.KueueJobUID: m[1]}); err != nil || len(wls.Items) == 0 {
		return p, err
	}
	w := &wls.Items[0]
	p.Priority = w.Spec.Priority
	run, _, isRun := attemptOf(w)
	switch {
	case w.Namespace != viewer && isRun:
		p.Words = "a run of another team"
	case w.Namespace != viewer:
		p.Words = "a workload of another team"
	case isRun:
		p.Words = "run " + run
	default:
		p.Words = "workload " + w.Name
	}
	return p, nil
}

// SetupWithManager watches TauRuns, and Kueue's Workloads for the
// admission and admission checks they show.
func (r *AuditReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("audit").
		For(&taugridv1.TauRun{}).
		Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(workloadToRun)).
		Complete(r)
}

func workloadToRun(_ context.Context, o client.Object) []reconcile.Request {
	wl, ok := o.(*kueue.Workload)
	if !ok {
		return nil
	}
	if run, _, ok := attemptOf(wl); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: run}}}
	}
	return nil
}
