// Package admission is TauGrid's Kueue admission check: a workload in a
// queue TauGrid manages is admitted only when it is the Job or RayJob
// TauGrid rendered for one of its runs, unchanged since. The platform puts
// the check on every ClusterQueue it applies; whoever creates a Job with a
// queue label by another way (kubectl, a script, a compromised CI) gets a
// workload Kueue never admits, and a status that says why.
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// ControllerName is the spec.controllerName of the AdmissionChecks this
// controller decides (each platform makes one).
const ControllerName = taugridv1.PolicyCheckController

// Check decides the TauGrid admission check of each workload that waits
// on it.
type Check struct {
	client.Client
	// APIReader reads Jobs and RayJobs whole when the cache, which keeps
	// no pod templates (shared.CacheTransform), cannot show them unchanged
	// (decide).
	APIReader client.Reader
	Clock     clock.PassiveClock

	// Worker, when set, is the MultiKueue worker cluster whose copies of
	// the manager's workloads this Check decides: Client and APIReader
	// are then the worker's, and Manager and ManagerAPIReader read the
	// manager's runs and Jobs (workers.go).
	Worker           string
	Manager          client.Reader
	ManagerAPIReader client.Reader
}

// Concurrency is how many workloads a Check decides at once. Each
// decision mostly waits on the API server (a read of the Job, a patch of
// the Workload): one at a time decided 1.6 a second while 730 waited on a
// loaded 2-core API server (hack/scale, 1,000 runs), and Kueue admits
// nothing the check has not passed.
const Concurrency = 16

// runs reads the TauRuns: they are the manager's, wherever the workload is.
func (c *Check) runs() client.Reader {
	if c.Manager != nil {
		return c.Manager
	}
	return c.Client
}

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=get;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=admissionchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=admissionchecks/status,verbs=get;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns,verbs=get;list;watch

// Reconcile gives the verdict on a workload whose check is Pending.
func (c *Check) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wl := &kueue.Workload{}
	if err := c.Get(ctx, req.NamespacedName, wl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Kueue asks for the checks of a workload that holds quota, the moment
	// before it admits: deciding then leaves no time to change the Job
	// between the verdict and the admission.
	if !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		return reconcile.Result{}, nil
	}
	i, err := c.pending(ctx, wl)
	if err != nil || i < 0 {
		return reconcile.Result{}, err
	}
	decide := c.decide
	if c.Worker != "" {
		decide = c.decideCopy
	}
	v, err := decide(ctx, wl)
	if err != nil {
		return reconcile.Result{}, err
	}
	st := wl.Status.AdmissionChecks[i]
	if v.state == st.State && v.message == st.Message {
		return reconcile.Result{}, nil
	}
	if v.state == kueue.CheckStateRejected && wl.Annotations[taugridv1.AnnotationAdmissionRefusal] != v.message {
		// Written first: Kueue resets the state (and its message) when it
		// deactivates the workload.
		base := wl.DeepCopy()
		metav1.SetMetaDataAnnotation(&wl.ObjectMeta, taugridv1.AnnotationAdmissionRefusal, v.message)
		if err := c.Patch(ctx, wl, client.MergeFrom(base)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	// The metadata patch brought back the workload as stored: its check
	// is found again by name, and must still be Pending.
	i = slices.IndexFunc(wl.Status.AdmissionChecks, func(s kueue.AdmissionCheckState) bool { return s.Name == st.Name })
	if i < 0 || wl.Status.AdmissionChecks[i].State != kueue.CheckStatePending {
		return reconcile.Result{}, nil
	}
	st = kueue.AdmissionCheckState{Name: st.Name, State: v.state, Message: v.message, LastTransitionTime: wl.Status.AdmissionChecks[i].LastTransitionTime}
	if v.state != wl.Status.AdmissionChecks[i].State {
		st.LastTransitionTime = metav1.NewTime(c.Clock.Now())
	}
	err = c.Status().Patch(ctx, wl, verdictPatch(i, wl.Status.AdmissionChecks[i], st))
	if shared.PatchTestFailed(err) {
		// The check is no longer the Pending one decided on: Kueue reset
		// or moved it, and the change's watch event brings the workload
		// back.
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(err)
}

// verdictPatch writes st over the check state at index i of a workload's
// status, on the condition that it is still was: the same check, Pending
// since the same time. Kueue writes the workload's status too (its
// conditions, the other checks' states) and the API server applies the
// patch to the copy it stores, so only a change to this check refuses it:
// a merge patch of the whole list would need the copy's resourceVersion,
// and be refused for every write of Kueue's since.
func verdictPatch(i int, was, st kueue.AdmissionCheckState) client.Patch {
	at := fmt.Sprintf("/status/admissionChecks/%d", i)
	// What Kueue keeps in the state besides (its retry count and
	// requeue time) stays as it is.
	ops := []map[string]any{
		{"op": "test", "path": at + "/name", "value": was.Name},
		{"op": "test", "path": at + "/state", "value": was.State},
		{"op": "test", "path": at + "/lastTransitionTime", "value": was.LastTransitionTime},
		{"op": "add", "path": at + "/state", "value": st.State},
		{"op": "add", "path": at + "/message", "value": st.Message},
		{"op": "add", "path": at + "/lastTransitionTime", "value": st.LastTransitionTime},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		panic(err) // strings and times always marshal
	}
	return client.RawPatch(types.JSONPatchType, data)
}

// pending is the index in wl's check states of a Pending one this
// controller decides; -1 when there is none.
func (c *Check) pending(ctx context.Context, wl *kueue.Workload) (int, error) {
	for i, st := range wl.Status.AdmissionChecks {
		if st.State != kueue.CheckStatePending {
			continue
		}
		ac := &kueue.AdmissionCheck{}
		err := c.Get(ctx, client.ObjectKey{Name: string(st.Name)}, ac)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return -1, err
		}
		if ac.Spec.ControllerName == ControllerName {
			return i, nil
		}
	}
	return -1, nil
}

// anyPending: a workload that holds quota with some check Pending may
// wait on this one.
func anyPending(o client.Object) bool {
	wl, ok := o.(*kueue.Workload)
	return ok && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && slices.ContainsFunc(wl.Status.AdmissionChecks, func(st kueue.AdmissionCheckState) bool {
		return st.State == kueue.CheckStatePending
	})
}

// SetupWithManager watches the workloads that wait on the check, and the
// runs, whose recorded workload a waiting check may need.
func (c *Check) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("admission").
		WithOptions(controller.Options{MaxConcurrentReconciles: Concurrency}).
		For(&kueue.Workload{}, builder.WithPredicates(predicate.NewPredicateFuncs(anyPending))).
		Watches(&taugridv1.TauRun{}, handler.EnqueueRequestsFromMapFunc(c.workloadsOfRun), builder.WithPredicates(recorded{})).
		Complete(c)
}

// workloadsOfRun maps a run to the workloads of its recorded Job or RayJob.
func (c *Check) workloadsOfRun(ctx context.Context, o client.Object) []reconcile.Request {
	run, ok := o.(*taugridv1.TauRun)
	if !ok || run.Status.Workload == nil {
		return nil
	}
	var wls kueue.WorkloadList
	w := run.Status.Workload
	if err := c.List(ctx, &wls, client.InNamespace(run.Namespace), client.MatchingFields{shared.IndexWorkloadOwner: w.Kind + "/" + w.Name}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, wl := range wls.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}})
	}
	return out
}

// recorded passes a run's update that records a new workload: the moment
// a check waiting for it can be decided.
type recorded struct{ predicate.Funcs }

func (recorded) Create(event.CreateEvent) bool { return false }
func (recorded) Delete(event.DeleteEvent) bool { return false }
func (recorded) Update(e event.UpdateEvent) bool {
	was, wok := e.ObjectOld.(*taugridv1.TauRun)
	now, nok := e.ObjectNew.(*taugridv1.TauRun)
	if !wok || !nok || now.Status.Workload == nil || now.Status.Workload.UID == "" {
		return false
	}
	return was.Status.Workload == nil || was.Status.Workload.UID != now.Status.Workload.UID
}

// Activator keeps TauGrid's AdmissionChecks Active: Kueue admits nothing
// through a ClusterQueue whose checks are not.
type Activator struct {
	client.Client
	Clock clock.PassiveClock
}

// Reconcile marks an AdmissionCheck of TauGrid's Active.
func (a *Activator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ac := &kueue.AdmissionCheck{}
	if err := a.Get(ctx, req.NamespacedName, ac); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ac.Spec.ControllerName != ControllerName {
		return reconcile.Result{}, nil
	}
	base := ac.DeepCopy()
	shared.SetCondition(&ac.Status.Conditions, ac.Generation, a.Clock.Now(), kueue.AdmissionCheckActive, metav1.ConditionTrue,
		"Active", "TauGrid admits the workloads it rendered for its runs, unchanged since")
	if apimeta.IsStatusConditionTrue(base.Status.Conditions, kueue.AdmissionCheckActive) &&
		slices.EqualFunc(base.Status.Conditions, ac.Status.Conditions, func(x, y metav1.Condition) bool { return x.Message == y.Message }) {
		return reconcile.Result{}, nil
	}
	if err := a.Status().Patch(ctx, ac, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("marking AdmissionCheck %s active: %w", ac.Name, err)
	}
	return reconcile.Result{}, nil
}

// SetupWithManager watches AdmissionChecks.
func (a *Activator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("admissioncheck").
		For(&kueue.AdmissionCheck{}).
		Complete(a)
}
