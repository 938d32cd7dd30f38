package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// recordSettle is how soon a run is looked at again after a fact was
// recorded on it, or after its cache was seen to lag: long enough for the
// cache to catch up with the status just written.
const recordSettle = 200 * time.Millisecond

// Event reasons, equal to the condition reasons they accompany.
const (
	ReasonSubmitted     = "Submitted"
	ReasonInvalidConfig = "InvalidConfig"
	ReasonCancelled     = "Cancelled"
	ReasonQueued        = "Queued"
	ReasonAdmitted      = "Admitted"
	ReasonRunning       = "Running"
	ReasonSucceeded     = "Succeeded"
	ReasonFailed        = "Failed"
	ReasonRetrying      = "Retrying"
	ReasonResumed       = "Resumed"
	// ReasonUnrecordedWorkload: a workload no status recorded stood where
	// the run's was to be made, and was deleted.
	ReasonUnrecordedWorkload = "UnrecordedWorkload"
)

// errStaleRun ends a submission to be tried again from a fresh look.
var errStaleRun = errors.New("the submission is tried again")

// RunReconciler turns a TauRun into a suspended Job or RayJob in Kueue and
// follows it to the end.
type RunReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	Files    policy.TauFileReader
	Policies policy.PolicyProvider
	// APIReader reads around the cache, to tell a workload that is gone from
	// one the cache has not seen yet. Nil: Client.
	APIReader client.Reader
	// Sources provides the source archive an attempt's pods fetch; nil
	// renders no fetch step.
	Sources SourceArchiver
	// Evidence links each run's evidence page; an attempt that ends is
	// marked for its controller to seal. Nil records none.
	Evidence *evidence.Page
	// Clusters reads the pods of attempts dispatched to MultiKueue worker
	// clusters; nil: every run's pods are read from Client.
	Clusters clusters.Locator
	// GPUUsage reads running attempts' GPU utilisation from the node
	// agents; nil reads none.
	GPUUsage GPUUsageSource
	// Workers is how many runs are reconciled at once; 0 means
	// DefaultRunWorkers.
	Workers int
	// DetailInterval holds back a status change that only adds detail
	// to a run's phase until this long after its last status write
	// (detailWait); 0 writes every change at once.
	DetailInterval time.Duration
	// Indexed: Client's reads are answered by a cache that holds
	// shared.Indexes (cmd/tau-controller's manager), and a run's pods and
	// a queue's unfinished Workloads are listed by them. False (a client
	// that reads the API server, which knows no such field): by their
	// namespace and labels.
	Indexed bool
	// HoldersKept is how long a look at what holds a ClusterQueue's
	// quota, which every queued run's start estimate reads, serves the
	// queued runs that look after it (holdingOf; DefaultHoldersKept); 0
	// reads it at every look.
	HoldersKept time.Duration
	// Written records the run status writes of this process, shared with
	// the other controllers that write a run's status; nil: a record of
	// the reconciler's own writes only (see CacheLagsWrite).
	Written *shared.Written
	// PhaseWrites, when set, receives how long after the cluster's news of
	// a run its new phase was stored (MetricPhaseWrite).
	PhaseWrites *prometheus.HistogramVec

	wakes     *wakeBook                              // see MetricPhaseWrite; wakesOf
	submitted *shared.Memo[types.UID, submission]    // see cacheLagsSubmission
	held      *shared.Memo[holdKey, struct{}]        // see holdOnWorker
	planned   *shared.Memo[types.UID, plannedLimits] // see limits

	statusWrites *shared.Memo[types.NamespacedName, time.Time] // see detailWait
	briefSteps   *shared.Memo[types.NamespacedName, brief]     // see noteBriefStep
	usageReads   *shared.Memo[types.NamespacedName, usageRead] // see reconcileGPUUsage

	waiting *lru.Cache                    // see waitingSlots
	holding *shared.Memo[string, holding] // by ClusterQueue; see holdingOf

	// readyRuns counts the runs ready in the controller's work queue, set
	// by newQueue before the controller starts its workers; unset, as in a
	// test that calls Reconcile itself, the controller is never behind.
	readyRuns func() int
}

// SourceArchiver builds a run's source archive and says where pods fetch it.
type SourceArchiver interface {
	SourceArchive(ctx context.Context, repo *taugridv1.TauRepository, run *taugridv1.TauRun) (*render.SourceArchive, error)
}

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns/status,verbs=get;patch
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the run; an ended one only has what its attempts hold
// released (reconcileEnded). Any other runs reconcileRun's steps on a
// copy whose status finish patches once, deferred. A requeue that is a
// timer comes back at PriorityTimer (timed).
func (r *RunReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	return timed(res, err), err
}

func (r *RunReconciler) reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, err error) {
	run := &taugridv1.TauRun{}
	if err := r.Get(ctx, req.NamespacedName, run); err != nil {
		if apierrors.IsNotFound(err) {
			r.wakesOf().forget(req.NamespacedName)
			shared.WrittenOf(&r.Written).Forget(req.NamespacedName)
			shared.MemoOf(&r.statusWrites).Forget(req.NamespacedName)
			shared.MemoOf(&r.usageReads).Forget(req.NamespacedName)
			shared.MemoOf(&r.briefSteps).Forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !run.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	// The news that woke the run, if any, is this reconcile's to act on;
	// one that only waits gives it back (MetricPhaseWrite).
	r.wakesOf().take(req.NamespacedName)
	waited := true
	defer func() { r.wakesOf().done(req.NamespacedName, waited) }()
	// Held from this read to the status patch (shared.Written): no other
	// controller of this process writes the run in between.
	release, ok := shared.WrittenOf(&r.Written).TryHold(req.NamespacedName)
	if !ok {
		return reconcile.Result{RequeueAfter: shared.CacheLag}, nil
	}
	defer release()
	if r.CacheLagsWrite(run) {
		return reconcile.Result{RequeueAfter: shared.CacheLag}, nil
	}
	waited = false
	resume := resumeRequested(run)
	if run.Status.Phase.Final() && !resume {
		r.forgetLimits(run)
		if shared.Sealing(run) {
			return afterSeal(reconcile.Result{}), nil // released once sealed
		}
		return r.reconcileEnded(ctx, run)
	}
	base := run.DeepCopy()
	var submitted client.Object // the workload this reconcile submitted
	defer func() { result, err = r.finish(ctx, base, run, submitted, result, err) }()
	result, submitted, err = r.reconcileRun(ctx, run, resume)
	return result, err
}

// reconcileRun runs the steps of a run that has not ended: cancel it,
// reopen it on a resume request, submit its next attempt, or follow the
// one it has. It returns the workload it submitted, if any.
func (r *RunReconciler) reconcileRun(ctx context.Context, run *taugridv1.TauRun, resume bool) (reconcile.Result, client.Object, error) {
	if run.Spec.Cancel {
		res, err := r.reconcileCancel(ctx, run)
		return res, nil, err
	}
	if resume {
		r.reopen(run)
	}
	if run.Status.Workload != nil {
		res, err := r.reconcileProgress(ctx, run)
		return res, nil, err
	}
	if r.cacheLagsSubmission(run) {
		return reconcile.Result{RequeueAfter: recordSettle}, nil, nil
	}
	if refused, err := r.reconcileSignature(ctx, run); refused || err != nil {
		return reconcile.Result{}, nil, err
	}
	plan, err := r.plan(ctx, run, len(run.Status.Attempts)+1)
	if wait := r.retryDue(run, plan); wait > 0 && !resume {
		return reconcile.Result{RequeueAfter: wait}, nil, nil
	}
	submitted, err := r.reconcileSubmit(ctx, run, plan, err)
	if errors.Is(err, policy.ErrNoPolicyYet) {
		r.setPhase(run, taugridv1.PhasePending, err.Error())
		return reconcile.Result{}, nil, shared.Waiting(10*time.Second, err)
	}
	// The new workload's watch event brings the run back; reading it now
	// could race the cache. If a reconcile working from a copy the cache
	// had not caught up with spent those events, this look does.
	return reconcile.Result{RequeueAfter: submitRecheck}, submitted, err
}

// finish records what the reconcile did on the run and patches its status
// once. observedGeneration moves only when the generation was handled (no
// transient error and no wait: shared.Handled). A conflict means the
// reconcile worked from a stale copy: the run is looked at again at once,
// without an error's backoff. Once the status is stored, the submitted
// workload is announced, and what the ended attempts hold is released
// (after their evidence is sealed, when it is being sealed).
func (r *RunReconciler) finish(ctx context.Context, base, run *taugridv1.TauRun, submitted client.Object, res reconcile.Result, err error) (reconcile.Result, error) {
	if shared.Handled(err) {
		run.Status.ObservedGeneration = run.Generation
	}
	r.recordEnd(base, run)
	if wait := r.detailWait(base, run); wait > 0 {
		// Written when the interval is up, with what the run shows then.
		out, ferr := shared.Finish(res, err)
		if ferr == nil && (out.RequeueAfter == 0 || wait < out.RequeueAfter) {
			out.RequeueAfter = wait
		}
		return out, ferr
	}
	perr := r.PatchStatus(ctx, base, run)
	if apierrors.IsConflict(perr) {
		r.wakesOf().done(client.ObjectKeyFromObject(run), true) // looked at again at once, from the same news
		return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
	}
	if perr == nil && submitted != nil {
		r.announceSubmitted(run, submitted)
	}
	switch {
	case perr == nil && shared.Sealing(run):
		// The evidence controller seals the ended attempts from their
		// pods; they are released after.
		res = afterSeal(res)
	case perr == nil:
		perr = r.releaseEnded(ctx, run)
	}
	if perr != nil {
		return reconcile.Result{}, errors.Join(err, perr)
	}
	return shared.Finish(res, err)
}

// The patch carries the resourceVersion it was computed from: a reconcile
// that read a copy the cache had not caught up with gets a conflict, not a
// status that mixes its stale phase with newer fields (Running with an
// admitted run's message). The run's watch event brings a fresh look.
func (r *RunReconciler) PatchStatus(ctx context.Context, base, run *taugridv1.TauRun) error {
	if equality.Semantic.DeepEqual(base.Status, run.Status) {
		return nil
	}
	err := r.Status().Patch(ctx, run, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if err == nil {
		r.noteWrite(run)
		shared.WrittenOf(&r.Written).Note(run, base.ResourceVersion, r.Clock.Now())
		r.notePhaseWrite(client.ObjectKeyFromObject(run), base.Status.Phase, run.Status.Phase)
	}
	return client.IgnoreNotFound(err)
}

// resumeRequested reports an unhandled resume request on a failed run.
func resumeRequested(run *taugridv1.TauRun) bool {
	v := run.Annotations[taugridv1.AnnotationResume]
	return v != "" && v != run.Status.LastHandledResume && run.Status.Phase == taugridv1.PhaseFailed && !run.Spec.Cancel &&
		len(run.Status.Attempts) > 0 // a run that never ran has nothing to resume: it was invalid
}

// reopen takes a failed run back to Pending for its next attempt.
func (r *RunReconciler) reopen(run *taugridv1.TauRun) {
	run.Status.LastHandledResume = run.Annotations[taugridv1.AnnotationResume]
	run.Status.Workload = nil
	apimeta.RemoveStatusCondition(&run.Status.Conditions, taugridv1.ConditionStalled)
	msg := fmt.Sprintf("resuming by request: attempt %d", len(run.Status.Attempts)+1)
	r.setPhase(run, taugridv1.PhasePending, msg)
	r.setCondition(run, taugridv1.ConditionReady, metav1.ConditionFalse, ReasonResumed, msg)
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, ReasonResumed, "Resume", "%s", msg)
}

// retryDue is how long the next attempt, planned as plan, must still wait
// after the last attempt ended; 0 when it is due (or for the first
// attempt, or without a plan: reconcileSubmit reports why there is none).
func (r *RunReconciler) retryDue(run *taugridv1.TauRun, plan *render.Plan) time.Duration {
	n := len(run.Status.Attempts)
	if n == 0 || run.Status.Attempts[n-1].EndTime == nil || plan == nil {
		return 0
	}
	return max(0, run.Status.Attempts[n-1].EndTime.Add(plan.Retry.Backoff(n)).Sub(r.Clock.Now()))
}

// reconcileSubmit creates the workload of plan, the tau file at the run's
// commit rendered under the policy in force, or reports planErr, why there
// is no plan. An invalid file or a policy violation fails the run (Stalled,
// Ready=False) and submits nothing. It returns the workload it submitted.
func (r *RunReconciler) reconcileSubmit(ctx context.Context, run *taugridv1.TauRun, plan *render.Plan, planErr error) (client.Object, error) {
	attempt := len(run.Status.Attempts) + 1
	if attempt == 1 {
		r.setPhase(run, taugridv1.PhasePending, "reading "+render.TargetFile(run.Spec.Target))
	}
	err := planErr
	if err == nil {
		err = r.attachSource(ctx, run, plan)
	}
	var objs []client.Object
	if err == nil {
		objs = render.Render(plan)
		err = policy.CheckFeasible(ctx, r.Client, run.Namespace, plan, objs)
	}
	if len(render.Errors(err)) > 0 || errors.Is(err, gitsource.ErrNotFound) {
		r.fail(run, ReasonInvalidConfig, err.Error())
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	w := objs[0]
	kind := w.GetObjectKind().GroupVersionKind().Kind // Create clears TypeMeta
	if left, err := r.leftoverWorkloads(ctx, run.Namespace, kind, w); err != nil || len(left) > 0 {
		if err != nil {
			return nil, err
		}
		r.setPhase(run, taugridv1.PhasePending, fmt.Sprintf("waiting for Kueue to remove the Workload %s of an earlier %s %s before making it again",
			strings.Join(left, ", "), kind, w.GetName()))
		return nil, shared.Waiting(time.Second, errors.New(run.Status.Message))
	}
	created, err := r.createAll(ctx, run, objs)
	if err != nil {
		return nil, err
	}
	if !created {
		live, err := r.unrecorded(ctx, run, kind, w)
		if err != nil {
			return nil, err
		}
		w = live
	}
	// w is now as the API server stored it (defaults, webhooks' changes):
	// what the policy admission check holds it to.
	fp, err := render.FingerprintOf(w)
	if err != nil {
		return nil, err
	}
	run.Status.Workload = &taugridv1.WorkloadStatus{Kind: kind, Name: w.GetName(),
		Queue: w.GetLabels()[render.LabelQueueName], UID: w.GetUID(), Digest: fp.Digest, FieldDigests: fp.Short(),
		Generation: w.GetGeneration(), LabelsDigest: fp.Labels}
	run.Status.Attempts = append(run.Status.Attempts, taugridv1.Attempt{Number: attempt, Workload: w.GetName()})
	r.setPhase(run, taugridv1.PhaseQueued, "submitted to queue "+run.Status.Workload.Queue)
	return w, nil // announced once the status says so
}

// createAll creates the run's objects, the workload first in objs, all at
// once: none needs another to exist first, and the workload is suspended
// until Kueue admits it, which the admission check allows only once the
// run's status records it, after this. One at a time, a submission took a
// round trip to the API server per object (hack/scale, 10,000 runs: 1.7 s
// each, with 4,632 runs waiting for their Job on 32 workers). An object
// that exists already is the run's from an earlier try, except the
// workload, which the caller looks at (created false).
func (r *RunReconciler) createAll(ctx context.Context, run *taugridv1.TauRun, objs []client.Object) (created bool, err error) {
	for _, o := range objs {
		if err := controllerutil.SetControllerReference(run, o, r.Scheme); err != nil {
			return false, err
		}
	}
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Go(func() { errs[i] = r.Create(ctx, o) })
	}
	wg.Wait()
	for i, o := range objs {
		if errs[i] != nil && !apierrors.IsAlreadyExists(errs[i]) {
			return false, fmt.Errorf("creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), errs[i])
		}
	}
	return !apierrors.IsAlreadyExists(errs[0]), nil
}

// unrecorded handles a workload that already exists where the run was to
// create its own. Either the cache has not caught up with a status that
// records it (the API server says so; the reconcile is repeated); or no
// status records it: a create whose status patch was refused, or an object
// someone else made under the run's name. The first is adopted, and
// returned, when the API server says it is what the run renders (a dry-run
// update to the rendered object changes nothing the admission check
// hashes); any other that Kueue holds is deleted and made again: it was
// never admitted, as the admission check admits only recorded objects.
func (r *RunReconciler) unrecorded(ctx context.Context, run *taugridv1.TauRun, kind string, w client.Object) (client.Object, error) {
	reader := r.uncached()
	fresh := &taugridv1.TauRun{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(run), fresh); err != nil {
		return nil, err
	}
	if ws := fresh.Status.Workload; ws != nil && ws.Name == w.GetName() && ws.UID != "" {
		return nil, fmt.Errorf("%s %s is recorded by a newer copy of the run than the cache holds: %w", kind, w.GetName(), errStaleRun)
	}
	live, ok := w.DeepCopyObject().(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s %s: not an object", kind, w.GetName())
	}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(w), live); err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, w.GetName(), err)
	}
	// One that runs already went past Kueue without TauGrid's admission
	// check (which admits only recorded objects): its queue has none, and
	// deleting it would only cut the attempt short.
	if metav1.IsControlledBy(live, run) {
		if started(live) {
			return live, nil
		}
		same, err := r.rendersAs(ctx, w, live)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, w.GetName(), err)
		}
		if same {
			return live, nil
		}
	}
	uid := live.GetUID()
	err := r.Delete(ctx, live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the unrecorded %s %s: %w", kind, w.GetName(), err)
	}
	// Its Kueue Workload too, at once, read from the API server (the cache
	// may not show it yet): Kueue would hand it to the object made again
	// under the name (leftoverWorkloads waits for it to go).
	if err := r.deleteWorkloadsOf(ctx, reader, run.Namespace, uid); err != nil {
		return nil, err
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, ReasonUnrecordedWorkload, "Submit",
		"%s %s existed, no status of the run recorded it and it is not what the run renders: deleted, to be created again", kind, w.GetName())
	return nil, fmt.Errorf("%s %s existed unrecorded and was deleted: %w", kind, w.GetName(), errStaleRun)
}

// started reports a Job or RayJob that Kueue let start.
func started(o client.Object) bool {
	switch x := o.(type) {
	case *batchv1.Job:
		return x.Spec.Suspend != nil && !*x.Spec.Suspend
	case *rayv1.RayJob:
		return !x.Spec.Suspend
	}
	return false
}

// rendersAs reports whether live is the rendered object w as the API
// server would store it: w, given live's identity and what the API server
// generated for it, is sent as a dry-run update, and the result must
// fingerprint as live does. A conflict (live changed since it was read)
// is an error to look again, not a difference.
func (r *RunReconciler) rendersAs(ctx context.Context, w, live client.Object) (bool, error) {
	probe, ok := w.DeepCopyObject().(client.Object)
	if !ok {
		return false, nil
	}
	probe.SetResourceVersion(live.GetResourceVersion())
	probe.SetUID(live.GetUID())
	if p, ok := probe.(*batchv1.Job); ok {
		l := live.(*batchv1.Job)
		p.Spec.Selector = l.Spec.Selector
		for _, k := range shared.GeneratedJobLabels {
			if v, ok := l.Spec.Template.Labels[k]; ok {
				metav1.SetMetaDataLabel(&p.Spec.Template.ObjectMeta, k, v)
			}
		}
	}
	if err := r.Update(ctx, probe, client.DryRunAll); apierrors.IsConflict(err) {
		// Changed since it was read (Kueue admitting it): what it is
		// now is looked at again, not judged from the old copy.
		return false, fmt.Errorf("changed while compared with what the run renders: %w", errStaleRun)
	} else if err != nil {
		return false, nil //nolint:nilerr // refused as an update of live: it is not what the run renders
	}
	a, aerr := render.FingerprintOf(probe)
	b, berr := render.FingerprintOf(live)
	return aerr == nil && berr == nil && a.Digest == b.Digest, nil
}

// plan resolves the attempt (resolve) and records on the status what it
// was planned from: the tau file and its digest, the policy's commit and
// digest.
func (r *RunReconciler) plan(ctx context.Context, run *taugridv1.TauRun, attempt int) (*render.Plan, error) {
	plan, from, err := r.resolve(ctx, run, attempt, true)
	if from != nil { // also when the policy refuses the file: the status says which
		run.Status.TauFile, run.Status.ConfigDigest = from.tauFile, from.configDigest
		run.Status.PolicyCommit, run.Status.PolicyDigest = from.policyCommit, from.policyDigest
	}
	return plan, err
}

// planInputs are what an attempt was planned from.
type planInputs struct {
	tauFile, configDigest      string
	policyCommit, policyDigest string
}

// resolve loads the tau file and the policy and resolves an attempt. A
// retry avoids the nodes of earlier attempts that hit a GPU fault or lost
// their node, and resumes from the checkpoint directory. A submission
// (submit) also checks the types of the Secrets the run reads, which costs
// a read of each from the API server; a queued run's limits need none.
func (r *RunReconciler) resolve(ctx context.Context, run *taugridv1.TauRun, attempt int, submit bool) (*render.Plan, *planInputs, error) {
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo); err != nil {
		return nil, nil, fmt.Errorf("repository %s: %w", run.Spec.Repository, err)
	}
	file := render.TargetFile(run.Spec.Target)
	data, err := r.Files.ReadFile(ctx, repo, run.Spec.Trigger.Ref, run.Spec.Commit, file)
	if err != nil {
		return nil, nil, err
	}
	rc, err := render.LoadConfigWithOverrides(file, data, run.Spec.Trigger.Overrides)
	if err != nil {
		return nil, nil, err
	}
	pol, commit, err := r.Policies.Policy(ctx, repo.Spec.Platform)
	if err != nil {
		return nil, nil, err
	}
	tenant := pol.TenantForNamespace(run.Namespace)
	if tenant == nil {
		return nil, nil, &render.FieldError{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("namespace %s is no tenant's in the platform policy", run.Namespace)}
	}
	protected, err := r.credentialSecrets(ctx, run.Namespace)
	if err != nil {
		return nil, nil, err
	}
	meta := shared.AttemptRun(run, attempt, commit)
	meta.ProtectedSecrets = protected
	if submit {
		if meta.SecretTypes, err = r.secretTypes(ctx, run.Namespace, rc.Runtime.EnvSecret); err != nil {
			return nil, nil, err
		}
	}
	from := &planInputs{tauFile: file, configDigest: rc.Digest, policyCommit: commit, policyDigest: pol.Digest}
	plan, err := render.Resolve(rc, pol, tenant.Name, meta)
	return plan, from, err
}

// credentialSecrets are the Secrets of a namespace that TauGrid reads for
// its repositories (git credentials, forge tokens and App keys, webhook
// secrets, allowed signers): no run's env_secret may name one.
func (r *RunReconciler) credentialSecrets(ctx context.Context, ns string) ([]string, error) {
	var repos taugridv1.TauRepositoryList
	if err := r.List(ctx, &repos, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var names []string
	for _, repo := range repos.Items {
		s := repo.Spec
		if s.SecretRef != nil {
			names = append(names, s.SecretRef.Name)
		}
		if s.Webhook != nil {
			names = append(names, s.Webhook.SecretRef.Name)
		}
		if s.Forge != nil {
			names = append(names, s.Forge.SecretRef.Name)
		}
		if s.Verification != nil {
			names = append(names, s.Verification.SecretRef.Name)
		}
	}
	return names, nil
}

// secretTypes reads the types of the Secrets env names ("secret:key"
// values), for the policy to refuse a type it does not allow (a
// ServiceAccount token under an allowed name). A Secret that does not
// exist is left out: the pod waits for it, and its type is checked when a
// later attempt is submitted.
func (r *RunReconciler) secretTypes(ctx context.Context, ns string, env map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for _, ref := range env {
		name, _, _ := strings.Cut(ref, ":")
		if _, seen := out[name]; seen || name == "" {
			continue
		}
		s := &corev1.Secret{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the type of Secret %s: %w", name, err)
		}
		out[name] = string(s.Type)
	}
	return out, nil
}

// attachSource builds the commit's source archive for the attempt's pods.
// Only a submission needs it; retry decisions plan without it.
func (r *RunReconciler) attachSource(ctx context.Context, run *taugridv1.TauRun, plan *render.Plan) error {
	if r.Sources == nil {
		return nil
	}
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo); err != nil {
		return fmt.Errorf("repository %s: %w", run.Spec.Repository, err)
	}
	src, err := r.Sources.SourceArchive(ctx, repo, run)
	if err != nil {
		return err
	}
	// The fence must admit the source server the pods fetch from: a
	// server it cannot name is the platform's to fix (--source-url).
	if err := plan.AttachSource(src); err != nil {
		return err
	}
	run.Status.SourceDigest = src.SHA256
	return nil
}

// reconcileProgress follows the attempt's workload, Kueue's Workload and
// the pods, and moves the phase; sets Ready when the run ends.
func (r *RunReconciler) reconcileProgress(ctx context.Context, run *taugridv1.TauRun) (reconcile.Result, error) {
	look, stop, err := r.observeAttempt(ctx, run)
	if stop != nil || err != nil {
		return ptr.Deref(stop, reconcile.Result{}), err
	}
	obs, p := look.obs, look.p
	// A preempted attempt is over: Kueue would requeue the same Job and
	// start it from scratch. TauGrid ends it instead, and the retry policy
	// decides whether a new attempt resumes from its checkpoint.
	if look.end == AttemptGoesOn && obs.WorkerErr != nil && !p.Phase.Final() {
		return r.workerUnreachable(run, obs)
	}
	preempted := look.end == AttemptPreempted || look.end == AttemptWorkerLost
	if preempted {
		p.Phase = taugridv1.PhaseFailed
	}
	check, err := r.checkPhase(ctx, run, obs, &p)
	if check.done {
		return reconcile.Result{}, err
	}
	if err != nil {
		// A deadline or the GPU usage could not be read now (git, the API
		// server, a node agent): what the cluster shows is recorded all
		// the same, and the error brings the run back with backoff.
		r.recordProgress(run, obs, p, check)
		return reconcile.Result{}, err
	}
	if p.Phase == taugridv1.PhaseFailed {
		after, retrying, err := r.reconcileFailure(ctx, run, obs, &p, preempted, check.idle)
		if err != nil || retrying {
			return reconcile.Result{RequeueAfter: after}, err
		}
	}
	r.recordProgress(run, obs, p, check)
	return reconcile.Result{RequeueAfter: recheckFor(run, p.Phase, check.recheck)}, nil
}

// attemptLook is what reconcileProgress observed of the current attempt.
type attemptLook struct {
	obs Observed
	p   Progress   // the phase the observation supports
	end AttemptEnd // how the attempt ended, if it did
}

// observeAttempt reads what the cluster shows of the current attempt,
// fences and holds it on the worker it was dispatched to, and settles how
// it ended. A non-nil result ends the reconcile with it: a preemption or
// a worker's loss to record first, a copy of the run older than what it
// ended on, or a workload deleted under the run, which fails it.
func (r *RunReconciler) observeAttempt(ctx context.Context, run *taugridv1.TauRun) (attemptLook, *reconcile.Result, error) {
	obs, err := r.observe(ctx, run)
	gone := apierrors.IsNotFound(err)
	if err != nil && !gone {
		return attemptLook{}, nil, err
	}
	if err := r.fenceOnWorker(ctx, run, obs.Cluster); err != nil {
		return attemptLook{}, nil, err
	}
	r.holdOnWorker(ctx, run, obs.Cluster)
	recordCluster(run, obs.Cluster)
	p := Advance(run.Status.Phase, run.Status.Message, DeriveProgress(obs))
	end, err := r.attemptEnd(ctx, run, &obs, gone, p.Phase == taugridv1.PhaseSucceeded)
	if err != nil {
		return attemptLook{}, nil, err
	}
	look := attemptLook{obs: obs, p: p, end: end}
	switch end {
	case AttemptRecordPreemption, AttemptRecordWorkerLoss:
		// The record first: deleting anything before it is stored would
		// leave the next look only a missing job to go by.
		return look, &reconcile.Result{RequeueAfter: recordSettle}, nil
	case AttemptPreempted, AttemptDeleted, AttemptWorkerLost:
		if stale, err := r.staleRun(ctx, run); err != nil || stale {
			return look, &reconcile.Result{RequeueAfter: recordSettle}, err
		}
	}
	if end == AttemptDeleted {
		r.fail(run, ReasonFailed, fmt.Sprintf("%s %s was deleted", run.Status.Workload.Kind, run.Status.Workload.Name))
		return look, &reconcile.Result{}, nil
	}
	return look, nil, nil
}

// phaseCheck is what checkPhase found.
type phaseCheck struct {
	wait    *runs.Explanation // why a queued attempt waits
	queue   runs.QueueState   // where it waits
	recheck time.Duration     // when a queue or start deadline falls due
	idle    bool              // GPUs idle, under idle_policy: stop
	done    bool              // a queue deadline ended the run
}

// checkPhase explains a queued attempt's wait and applies its queue
// deadlines, the start deadline to an admitted attempt and the idle-GPU
// rule to a running one. An attempt past its start deadline, or stopped
// for idle GPUs, fails (p.Phase).
func (r *RunReconciler) checkPhase(ctx context.Context, run *taugridv1.TauRun, obs Observed, p *Progress) (phaseCheck, error) {
	var c phaseCheck
	var err error
	switch p.Phase {
	case taugridv1.PhaseQueued:
		if obs.Workload != nil {
			c.queue = r.queueState(ctx, obs.Workload)
		}
		ex, dispatched := r.explainDispatched(ctx, obs.Workload, runs.ExplainWait(obs.Workload, c.queue))
		c.wait, p.Message = &ex, ex.Short
		var after time.Duration
		if c.done, after, err = r.queueDeadlines(ctx, run, ex); err == nil {
			c.recheck = sooner(after, dispatched)
		}
		if obs.Workload == nil {
			// Kueue's Workload brings the run its next look; should that
			// look be lost, this one is not the last.
			c.recheck = sooner(c.recheck, unseenRecheck)
		}
	case taugridv1.PhaseAdmitted:
		var late bool
		if late, c.recheck, err = r.startDeadline(ctx, run); late {
			p.Phase = taugridv1.PhaseFailed
		}
	case taugridv1.PhaseRunning:
		if c.idle, c.recheck, err = r.reconcileGPUUsage(ctx, run, obs); c.idle {
			p.Phase = taugridv1.PhaseFailed
		}
	}
	r.noteBriefStep(run, briefStep(*p, c.wait, obs.Workload))
	return c, err
}

// reconcileFailure ends a failed attempt: names its failure class, deletes
// a workload Kueue could otherwise requeue, and schedules the next attempt
// when the retry policy allows one (retrying, after the backoff);
// otherwise p's message says why the run ends.
func (r *RunReconciler) reconcileFailure(ctx context.Context, run *taugridv1.TauRun, obs Observed, p *Progress, preempted, idle bool) (time.Duration, bool, error) {
	notStarted := p.Admitted && !preempted && !running(obs) && !jobEndedInFailure(obs)
	class, msg, err := r.classify(ctx, run, obs, notStarted)
	if err != nil {
		return 0, false, err
	}
	p.Message = msg
	if idle {
		class, p.Message = endIdle(run, r.Clock.Now())
	}
	if preempted || !jobEndedInFailure(obs) {
		// The attempt is over but its workload is not: delete it so Kueue
		// cannot requeue it. Its pods get their termination grace to save
		// a checkpoint.
		if err := r.deleteWorkload(ctx, run); err != nil {
			return 0, false, err
		}
	}
	after, retrying, note, err := r.reconcileRetry(ctx, run, class, p.Message)
	if err != nil || retrying {
		return after, retrying, err
	}
	p.Message += note
	return 0, false, nil
}

// recordProgress writes the attempt's progress on the run: its workload's
// admission and wait, the attempt's start, the phase (with an event when
// it changes) and, once the run ends, Ready and Reconciling.
func (r *RunReconciler) recordProgress(run *taugridv1.TauRun, obs Observed, p Progress, c phaseCheck) {
	w := run.Status.Workload
	w.Admitted = p.Admitted
	w.Reason, w.Position = "", nil
	if c.wait != nil {
		w.Reason = c.wait.Long
		if c.queue.Position > 0 {
			w.Position = ptr.To(int32(c.queue.Position))
		}
	}
	if obs.Workload != nil {
		w.Workload = obs.Workload.Name
	}
	if n := len(run.Status.Attempts); p.Phase == taugridv1.PhaseRunning && n > 0 && run.Status.Attempts[n-1].StartTime == nil {
		now := metav1.NewTime(r.Clock.Now())
		run.Status.Attempts[n-1].StartTime = &now
	}
	recordNodes(run, obs)
	if p.Phase != run.Status.Phase && announced(p.Phase) {
		r.Recorder.Eventf(run, nil, eventType(p.Phase), string(p.Phase), "Progress", "%s", p.Message)
	}
	r.setPhase(run, p.Phase, p.Message)
	r.setPodsRunning(run, p)
	if p.Phase.Final() {
		status := metav1.ConditionTrue
		if p.Phase != taugridv1.PhaseSucceeded {
			status = metav1.ConditionFalse
		}
		r.setCondition(run, taugridv1.ConditionReady, status, string(p.Phase), p.Message)
		r.setCondition(run, taugridv1.ConditionReconciling, metav1.ConditionFalse, string(p.Phase), p.Message)
	}
}

// recordNodes adds the nodes the attempt's pods are bound to to the
// attempt's record, whatever its outcome: a good run's evidence says where
// it ran as a failed one's does. A node once recorded stays, though its
// pod is gone.
func recordNodes(run *taugridv1.TauRun, obs Observed) {
	n := len(run.Status.Attempts)
	if n == 0 || obs.WorkerErr != nil {
		return
	}
	var seen []string
	for i := range obs.Pods {
		if name := obs.Pods[i].Spec.NodeName; name != "" {
			seen = append(seen, name)
		}
	}
	a := &run.Status.Attempts[n-1]
	a.Nodes = mergeNodes(a.Nodes, seen)
}

// mergeNodes is the sorted union of two lists of node names; have itself
// when more adds none (the common look, at every reconcile of a run).
func mergeNodes(have, more []string) []string {
	if !slices.ContainsFunc(more, func(n string) bool { return !slices.Contains(have, n) }) {
		return have
	}
	out := append(slices.Clone(have), more...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Safety nets under the watches: an event a stale reconcile spent is made
// up for by a look soon after a submission, and by a slow resync of the
// runs that hold quota (admitted or running: as many as the cluster has
// room for, never the whole queue), so no run says less than the cluster
// shows for long. Queued runs hear from Kueue whenever their queue moves.
const (
	submitRecheck  = 2 * time.Second
	progressResync = 30 * time.Second
	// unseenRecheck: a queued run whose job Kueue has not made a Workload
	// of yet looks again this often (from the cache).
	unseenRecheck = 15 * time.Second
)

// reconcileRetry schedules another attempt when the tau file's resilience
// (capped by the platform) retries this failure class and attempts are
// left: the run goes back to Pending and its next attempt is submitted
// after the backoff. It reports whether it did.
func (r *RunReconciler) reconcileRetry(ctx context.Context, run *taugridv1.TauRun, class taugridv1.FailureClass, msg string) (time.Duration, bool, string, error) {
	plan, err := r.limits(ctx, run)
	switch {
	case errors.Is(err, errUnplannable):
		return 0, false, "", nil // the policy changed under the run: it cannot run again
	case err != nil:
		return 0, false, "", err
	case class == taugridv1.FailurePreempted && plan.MaxPreemptions != nil && preemptions(run) > *plan.MaxPreemptions:
		return 0, false, fmt.Sprintf("; preempted %d time(s), more than limits.max_preemptions (%d)", preemptions(run), *plan.MaxPreemptions), nil
	case !slices.Contains(plan.Retry.On, string(class)) || len(run.Status.Attempts) > plan.Retry.MaxRetries:
		return 0, false, "", nil
	}
	n := len(run.Status.Attempts)
	wait := plan.Retry.Backoff(n)
	run.Status.Workload = nil
	r.setPhase(run, taugridv1.PhasePending, fmt.Sprintf("retrying in %s (attempt %d of %d) after %s", wait, n+1, plan.Retry.MaxRetries+1, msg))
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, ReasonRetrying, "Retry", "%s", run.Status.Message)
	return wait, true, "", nil
}

// classify names the failed attempt's class in its status record and
// returns the run's message, "failed (Class): reason".
func (r *RunReconciler) classify(ctx context.Context, run *taugridv1.TauRun, obs Observed, notStarted bool) (taugridv1.FailureClass, string, error) {
	if n := len(run.Status.Attempts); n > 0 && workerLossRecorded(&run.Status.Attempts[n-1]) {
		class, msg := endWorkerLost(run, r.Clock.Now())
		return class, msg, nil
	}
	pods, nodes, err := r.failedPods(ctx, run, obs)
	if err != nil {
		return "", "", err
	}
	var recorded *taugridv1.Preemption
	if n := len(run.Status.Attempts); n > 0 {
		recorded = run.Status.Attempts[n-1].Preemption
	}
	class, reason := ClassifyFailure(FailureEvidence{Job: obs.Job, Pods: pods, Workload: obs.Workload, Preemption: recorded, Nodes: nodes})
	if notStarted {
		// Admitted, yet its pods never ran within the start deadline.
		var ok bool
		if class, reason, ok = startFailure(pods, nil); !ok {
			class, reason = taugridv1.FailureInfrastructure, "its pods did not start"
		}
		reason = "not running within the platform's start deadline: " + reason
	}
	if class == taugridv1.FailurePreempted {
		if recorded == nil {
			recorded = PreemptionOf(obs.Workload, time.Time{})
		}
		msg := ""
		if recorded != nil {
			msg = recorded.Message
		}
		if by, err := r.preemptor(ctx, msg, run.Namespace); err != nil {
			return "", "", err
		} else if by != "" {
			reason = by
		}
		if n := len(run.Status.Attempts); n > 0 && run.Status.Attempts[n-1].StartTime != nil {
			// What it had done since its last checkpoint is lost; at most this.
			ran := r.Clock.Now().Sub(run.Status.Attempts[n-1].StartTime.Time).Round(time.Second)
			reason += fmt.Sprintf(", after %s of running (work since its last checkpoint is lost)", ran)
		}
	}
	if n := len(run.Status.Attempts); n > 0 {
		a := &run.Status.Attempts[n-1]
		a.FailureClass, a.Reason = string(class), reason
		a.Nodes = mergeNodes(a.Nodes, slices.Collect(maps.Keys(nodes)))
		if a.EndTime == nil {
			now := metav1.NewTime(r.Clock.Now())
			a.EndTime = &now
		}
	}
	return class, fmt.Sprintf("failed (%s): %s", class, reason), nil
}

// failedPods are the current attempt's pods and their nodes (nil for a
// node that is gone), read from the cluster the attempt ran on.
func (r *RunReconciler) failedPods(ctx context.Context, run *taugridv1.TauRun, obs Observed) ([]corev1.Pod, map[string]*corev1.Node, error) {
	var pods corev1.PodList
	attempt := strconv.Itoa(len(run.Status.Attempts))
	podReader, err := r.podReader(ctx, dispatchedTo(run, obs.Workload))
	if err != nil {
		return nil, nil, err
	}
	if err := podReader.List(ctx, &pods, client.InNamespace(run.Namespace), client.MatchingLabels{render.LabelRun: run.Name}); err != nil {
		return nil, nil, err
	}
	pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		a, ok := p.Labels[render.LabelAttempt]
		return ok && a != attempt // pods of earlier attempts
	})
	nodes := map[string]*corev1.Node{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || nodes[p.Spec.NodeName] != nil {
			continue
		}
		n := &corev1.Node{}
		switch err := podReader.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, n); {
		case err == nil:
			nodes[p.Spec.NodeName] = n
		case apierrors.IsNotFound(err):
			nodes[p.Spec.NodeName] = nil // gone: the pod lost its node
		default:
			return nil, nil, err
		}
	}
	return pods.Items, nodes, nil
}

// announced says which phases a run's Event announces: its end, and a
// step back to Pending (a lost node, a retry). The forward steps between,
// Admitted and Running, are the status's phase and its list of phases,
// which kubectl get, tau status and the forge's status show; an Event
// each was two more writes a run to the API server every tenant shares
// (the issue "Scale, next round"). Submitted has its own Event.
func announced(p taugridv1.RunPhase) bool {
	return p.Final() || p == taugridv1.PhasePending
}

func eventType(p taugridv1.RunPhase) string {
	if p == taugridv1.PhaseFailed {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// observe reads the current attempt's workload, its Kueue Workload and its
// pods.
func (r *RunReconciler) observe(ctx context.Context, run *taugridv1.TauRun) (Observed, error) {
	var obs Observed
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Status.Workload.Name}
	var owner client.Object
	kind := run.Status.Workload.Kind
	switch kind {
	case "RayJob":
		obs.RayJob = &rayv1.RayJob{}
		owner = obs.RayJob
	default:
		obs.Job, kind = &batchv1.Job{}, "Job"
		owner = obs.Job
	}
	if err := r.Get(ctx, key, owner); apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, owner)
		if err != nil {
			return obs, err
		}
	} else if err != nil {
		return obs, err
	}
	// Kueue labels each Workload with its owner's UID; the cache indexes
	// them by their owner (shared.IndexWorkloadOwner): the run's own are
	// found without matching the labels of every Workload the namespace
	// has kept.
	var wls kueue.WorkloadList
	ofOwner := client.ListOption(client.MatchingLabels{shared.KueueJobUID: string(owner.GetUID())})
	if r.Indexed {
		ofOwner = client.MatchingFields{shared.IndexWorkloadOwner: kind + "/" + key.Name}
	}
	if err := r.List(ctx, &wls, client.InNamespace(run.Namespace), ofOwner); err != nil {
		return obs, err
	}
	for i := range wls.Items {
		if metav1.IsControlledBy(&wls.Items[i], owner) {
			obs.Workload = &wls.Items[i]
		}
	}
	// Pods and nodes are only read, so the cache's own objects serve: a
	// held run of a 1,000-node cluster copies no node. A dispatched
	// attempt's are its worker's.
	obs.Cluster = dispatchedTo(run, obs.Workload)
	if lost := lostWorker(run, obs.Workload); lost != "" {
		obs.Cluster = lost // where the attempt's pods were
	}
	err := r.observePods(ctx, run, &obs)
	if obs.Cluster != "" {
		obs.WorkerErr, err = err, nil // one worker's outage is that run's alone
	}
	return obs, err
}

// observePods reads the attempt's pods, and the nodes when a pod is
// unschedulable, from the cluster it runs on.
func (r *RunReconciler) observePods(ctx context.Context, run *taugridv1.TauRun, obs *Observed) error {
	podReader, err := r.podReader(ctx, obs.Cluster)
	if err != nil {
		return err
	}
	var pods corev1.PodList
	attempt := strconv.Itoa(len(run.Status.Attempts))
	ofRun := []client.ListOption{client.MatchingLabels{render.LabelRun: run.Name, render.LabelAttempt: attempt}}
	if obs.Cluster == "" && r.Indexed {
		// From the run's own pods (shared.IndexPodRun), the attempt's
		// label matched among them alone. A worker's cache has no index.
		ofRun = []client.ListOption{client.MatchingFields{shared.IndexPodRun: run.Name}, client.MatchingLabels{render.LabelAttempt: attempt}}
	}
	if err := podReader.List(ctx, &pods, append(ofRun, client.InNamespace(run.Namespace), client.UnsafeDisableDeepCopy)...); err != nil {
		return err
	}
	obs.Pods = pods.Items
	if slices.ContainsFunc(obs.Pods, func(p corev1.Pod) bool { return unscheduled(&p) != nil }) {
		var nodes corev1.NodeList
		if err := podReader.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		obs.Nodes = nodes.Items
	}
	return nil
}

// reconcileCancel deletes the workload and reports Cancelled once its pods
// are gone. The run's ref or tag was deleted, or someone cancelled it.
func (r *RunReconciler) reconcileCancel(ctx context.Context, run *taugridv1.TauRun) (reconcile.Result, error) {
	if w := run.Status.Workload; w != nil {
		if err := r.deleteWorkload(ctx, run); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.release(ctx, run, func(int) bool { return true }); err != nil {
			return reconcile.Result{}, err
		}
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(run.Namespace), client.MatchingLabels{render.LabelRun: run.Name}); err != nil {
			return reconcile.Result{}, err
		}
		// Pods that have stopped (an earlier attempt's, kept with its Job
		// until the Job's TTL) hold nothing to wait for.
		if n := len(slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return shared.PodTerminated(&p) })); n > 0 {
			r.setPhase(run, run.Status.Phase, fmt.Sprintf("cancelling: waiting for %d pods to stop", n))
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
	}
	msg := "cancelled: its run ref or tag was deleted"
	r.setPhase(run, taugridv1.PhaseCancelled, msg)
	r.setCondition(run, taugridv1.ConditionReady, metav1.ConditionFalse, ReasonCancelled, msg)
	r.setCondition(run, taugridv1.ConditionReconciling, metav1.ConditionFalse, ReasonCancelled, msg)
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, ReasonCancelled, "Cancel", "%s", msg)
	return reconcile.Result{}, nil
}

func (r *RunReconciler) deleteWorkload(ctx context.Context, run *taugridv1.TauRun) error {
	w := run.Status.Workload
	var obj client.Object = &batchv1.Job{}
	if w.Kind == "RayJob" {
		obj = &rayv1.RayJob{}
	}
	obj.SetNamespace(run.Namespace)
	obj.SetName(w.Name)
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
		// The job went first: its Workload, pending again once evicted,
		// must not wait for the garbage collector, nor be admitted again.
		wl, err := r.WorkloadOwnedBy(ctx, run.Namespace, w.Name)
		if wl == nil || err != nil {
			return err
		}
		return client.IgnoreNotFound(r.Delete(ctx, wl))
	} else if err != nil {
		return err
	}
	if err := r.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return err
	}
	// Its Kueue Workload too, at once: the garbage collector would, but
	// until it does the Workload may still hold quota.
	return r.deleteWorkloadsOf(ctx, r.Client, run.Namespace, obj.GetUID())
}

// deleteWorkloadsOf deletes the Kueue Workloads of the Job or RayJob with
// uid, as reader lists them (Kueue labels each with its owner's UID).
func (r *RunReconciler) deleteWorkloadsOf(ctx context.Context, reader client.Reader, namespace string, uid types.UID) error {
	var wls kueue.WorkloadList
	if err := reader.List(ctx, &wls, client.InNamespace(namespace), client.MatchingLabels{shared.KueueJobUID: string(uid)}); err != nil {
		return err
	}
	for i := range wls.Items {
		if err := r.Delete(ctx, &wls.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// fail ends the run as Failed with a Stalled condition: a human must act.
func (r *RunReconciler) fail(run *taugridv1.TauRun, reason, msg string) {
	r.setPhase(run, taugridv1.PhaseFailed, msg)
	r.setCondition(run, taugridv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	r.setCondition(run, taugridv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	r.setCondition(run, taugridv1.ConditionReconciling, metav1.ConditionFalse, reason, msg)
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, "Validate", "%s", shared.FirstLine(msg))
}

// setPhase moves the run to a phase, stamping the time it entered it.
func (r *RunReconciler) setPhase(run *taugridv1.TauRun, phase taugridv1.RunPhase, msg string) {
	run.Status.Message = msg
	// A new run reads Pending before any phase is recorded (the schema's
	// default): its first phase is recorded all the same.
	if run.Status.Phase == phase && len(run.Status.Phases) > 0 {
		return
	}
	run.Status.Phase = phase
	run.Status.Phases = append(run.Status.Phases, taugridv1.PhaseTransition{Phase: phase, Time: metav1.NewTime(r.Clock.Now())})
	if !phase.Final() {
		r.setCondition(run, taugridv1.ConditionReconciling, metav1.ConditionTrue, string(phase), msg)
	}
}

// setPodsRunning says whether the attempt's pods run, and while admitted
// why not: on their way, or held.
func (r *RunReconciler) setPodsRunning(run *taugridv1.TauRun, p Progress) {
	switch {
	case p.Phase == taugridv1.PhaseRunning:
		r.setCondition(run, taugridv1.ConditionPodsRunning, metav1.ConditionTrue, taugridv1.ReasonPodsRunning, "every pod of the attempt runs")
	case p.Phase == taugridv1.PhaseAdmitted && p.Held:
		r.setCondition(run, taugridv1.ConditionPodsRunning, metav1.ConditionFalse, taugridv1.ReasonPodsNotStarting, p.Message)
	case p.Phase == taugridv1.PhaseAdmitted:
		r.setCondition(run, taugridv1.ConditionPodsRunning, metav1.ConditionFalse, taugridv1.ReasonPodsStarting, p.Message)
	default:
		apimeta.RemoveStatusCondition(&run.Status.Conditions, taugridv1.ConditionPodsRunning)
	}
}

func (r *RunReconciler) setCondition(run *taugridv1.TauRun, t string, s metav1.ConditionStatus, reason, msg string) {
	shared.SetCondition(&run.Status.Conditions, run.Generation, r.Clock.Now(), t, s, reason, msg)
}

// SetupWithManager registers the reconciler: it watches TauRuns, the Jobs
// and RayJobs they own, Kueue's Workloads for those, and their pods.
func (r *RunReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// What the cluster shows of a run wakes it ahead of new runs
	// (PriorityObserved).
	woke := func(run types.NamespacedName) { r.wakesOf().woke(run, r.Clock.Now()) }
	ownedByRun := observed(handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &taugridv1.TauRun{}, handler.OnlyControllerOwner()), woke)
	return ctrl.NewControllerManagedBy(mgr).
		// A new run waits its turn at priority 0; a change to a run
		// already there wakes it ahead of the new runs (runChanges).
		For(&taugridv1.TauRun{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Watches(&taugridv1.TauRun{}, observed(&handler.EnqueueRequestForObject{}, woke), builder.WithPredicates(runChanges())).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, DefaultRunWorkers), NewQueue: r.newQueue(mgr.GetLogger())}).
		// Of a Job, a Workload or a pod, an update wakes the run only if it
		// changed something the run reads (ChangesWhatARunReads).
		Watches(&batchv1.Job{}, ownedByRun, builder.WithPredicates(ChangesWhatARunReads())).
		Watches(&rayv1.RayJob{}, ownedByRun).
		Watches(&kueue.Workload{}, observed(handler.EnqueueRequestsFromMapFunc(workloadToRun), woke), builder.WithPredicates(ChangesWhatARunReads())).
		// Phases come from the pods: a pod scheduled, pulling, running or
		// stuck changes what the run says within a reconcile.
		Watches(&corev1.Pod{}, observed(handler.EnqueueRequestsFromMapFunc(podToRun), woke), builder.WithPredicates(ChangesWhatARunReads())).
		Complete(r)
}

// podToRun maps one of TauGrid's pods to its run by the run label every
// pod template carries.
func podToRun(_ context.Context, o client.Object) []reconcile.Request {
	if run := o.GetLabels()[render.LabelRun]; run != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: run}}}
	}
	return nil
}

// workloadToRun maps a Kueue Workload to the TauRun whose Job or RayJob owns
// it: workloads are named <run>-<attempt>.
func workloadToRun(_ context.Context, o client.Object) []reconcile.Request {
	if run, ok := runOfWorkload(o); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: run}}}
	}
	return nil
}

// runOfWorkload is the run whose Job or RayJob, named <run>-<attempt>,
// controls a Kueue Workload.
func runOfWorkload(o client.Object) (string, bool) {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return render.RunOfWorkload(ref.Name)
	}
	return "", false
}
