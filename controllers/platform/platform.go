package platform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// Labels and names for what the platform reconciler owns.
const (
	PlatformFieldManager = "taugrid-platform"
)

// Reasons of TauPlatform conditions and events.
const (
	ReasonPolicyApplied = "PolicyApplied"
	ReasonInvalidPolicy = "InvalidPolicy"
	ReasonRefNotFound   = "RefNotFound"
)

// PlatformReconciler keeps the cluster's policy in step with the platform
// repo: it validates each new commit, applies its Kueue objects, and records
// the last good commit that every render then uses.
type PlatformReconciler struct {
	client.Client
	Git      policy.Git
	Policies *policy.PolicyStore
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// MultiKueueNamespace is Kueue's namespace in a MultiKueue manager,
	// holding the workers' kubeconfig Secrets; "": one cluster, and a
	// policy declaring worker clusters is refused.
	MultiKueueNamespace string
	// AdmissionCheck puts TauGrid's admission check on every ClusterQueue
	// the platform applies: Kueue then admits only the workloads TauGrid
	// rendered, unchanged (controllers/admission decides). cmd/tau-controller
	// always sets it; a manager without the admission controller would
	// admit nothing.
	AdmissionCheck bool
	// Secrets, when set, is bound in every tenant namespace so that the
	// controller reads Secrets there; nil binds nothing (the controller's
	// own roles then say where it reads them).
	Secrets *SecretsGrant
	// Posters posts the previews of pull requests on the platform repo
	// (spec.forge); nil posts none.
	Posters *forge.Posters
}

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauplatforms,verbs=get;list;watch
// +kubebuilder:rbac:groups=taugrid.dev,resources=tauplatforms/status,verbs=get;patch
// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=tau-controller-tenant-secrets
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=resourceflavors;workloadpriorityclasses;cohorts;clusterqueues;localqueues,verbs=get;list;watch;create;patch;delete

// Reconcile polls the platform repo and applies a new good commit.
func (r *PlatformReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &taugridv1.TauPlatform{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() || p.Spec.Suspend {
		return reconcile.Result{}, nil
	}
	base := p.DeepCopy()
	err := r.reconcile(ctx, p)
	if shared.Handled(err) {
		p.Status.ObservedGeneration = p.Generation
	}
	if !equality.Semantic.DeepEqual(base.Status, p.Status) {
		if perr := r.Status().Patch(ctx, p, client.MergeFrom(base)); perr != nil {
			return reconcile.Result{}, perr
		}
	}
	return shared.Finish(r.requeue(p), err)
}

// reconcile reads the platform ref and gives the verdict on its commit.
func (r *PlatformReconciler) reconcile(ctx context.Context, p *taugridv1.TauPlatform) error {
	// First: the receiver path holds whether git answers or not.
	if err := r.reconcileWebhook(ctx, p); err != nil {
		return err
	}
	commit, refs, err := r.reconcileSource(ctx, p)
	if err != nil {
		return err
	}
	// Once the source reads again, what it said when it could not is
	// stale: the commit's verdict is given again, in full.
	again := r.sourceRecovered(p)
	if err := r.reconcilePolicy(ctx, p, commit, again); err != nil {
		return err
	}
	// Pull requests are previewed against the policy now in force.
	return r.previewPulls(ctx, p, refs)
}

// requeue polls again after the interval, with up to 10% jitter so that
// many objects do not poll in step.
func (r *PlatformReconciler) requeue(p *taugridv1.TauPlatform) reconcile.Result {
	return reconcile.Result{RequeueAfter: shared.Jitter(p.Spec.Interval.Duration)}
}

// reconcileSource finds the commit the platform ref points at. Sets
// Stalled (a missing Secret, RefNotFound) or Ready=False (GitUnavailable)
// when it cannot; a Secret it cannot read now is a transient error.
func (r *PlatformReconciler) reconcileSource(ctx context.Context, p *taugridv1.TauPlatform) (string, gitsource.RefSet, error) {
	remote, err := policy.RemoteFor(ctx, r.Client, r.Policies.Namespace, p.Spec.GitSource)
	if errors.Is(err, gitsource.ErrMissingSecret) {
		r.setCondition(p, taugridv1.ConditionStalled, metav1.ConditionTrue, shared.ReasonGitUnavailable, err.Error())
		return "", nil, shared.Terminal(err)
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading the platform's git credentials: %w", err)
	}
	refs, err := r.Git.ListRefs(ctx, remote)
	now := metav1.NewTime(r.Clock.Now())
	p.Status.LastPollTime = &now
	if err != nil {
		r.setCondition(p, taugridv1.ConditionReady, metav1.ConditionFalse, shared.ReasonGitUnavailable, err.Error())
		if gitsource.Transient(err) {
			return "", nil, err
		}
		return "", nil, shared.Terminal(err)
	}
	ref := policy.RefName(p.Spec.Ref)
	head, ok := refs[ref]
	if !ok {
		msg := fmt.Sprintf("%s not found in %s", ref, p.Spec.URL)
		r.setCondition(p, taugridv1.ConditionStalled, metav1.ConditionTrue, ReasonRefNotFound, msg)
		return "", nil, shared.Terminal(errors.New(msg))
	}
	return head.Commit(), refs, nil
}

// sourceRecovered drops the conditions reconcileSource set when it could
// not read the source, now that it can, and says whether there were any.
// A policy in force is Ready again; the commit's verdict is given anew.
func (r *PlatformReconciler) sourceRecovered(p *taugridv1.TauPlatform) bool {
	recovered := false
	if s := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionStalled); s != nil && s.Reason != ReasonInvalidPolicy {
		apimeta.RemoveStatusCondition(&p.Status.Conditions, taugridv1.ConditionStalled)
		recovered = true
	}
	if c := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionReady); c != nil && c.Reason == shared.ReasonGitUnavailable {
		if p.Status.Commit != "" {
			r.setCondition(p, taugridv1.ConditionReady, metav1.ConditionTrue, ReasonPolicyApplied, "policy at "+shared.Short(p.Status.Commit)+" in force")
		}
		recovered = true
	}
	return recovered
}

// reconcilePolicy validates the policy at commit and applies its queues.
// An invalid commit sets Stalled (InvalidPolicy) with file, line and field,
// and leaves the last good commit in force. Sets Ready on success.
// again gives the verdict even when the commit and the generation are the
// ones already judged. A failure that may pass (git or the API server
// unavailable, a conflict) is no verdict: it is returned, and the commit
// is tried again.
func (r *PlatformReconciler) reconcilePolicy(ctx context.Context, p *taugridv1.TauPlatform, commit string, again bool) error {
	if !again && commit == p.Status.LastAttemptedCommit && p.Status.ObservedGeneration == p.Generation {
		return nil // nothing new; the last verdict stands
	}
	err := r.applyPolicy(ctx, p, commit)
	if transient(err) {
		return fmt.Errorf("applying the policy at %s: %w", shared.Short(commit), err)
	}
	p.Status.LastAttemptedCommit = commit
	if err != nil {
		r.invalid(p, commit, err)
	}
	return nil
}

// transient reports a failure that may pass on its own: git unreachable,
// timing out or failing on its side, the API server unavailable, busy,
// timing out or in conflict.
func transient(err error) bool {
	return err != nil && (gitsource.Transient(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsConflict(err) ||
		apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded))
}

// applyPolicy loads the policy at commit, checks it against the cluster
// and applies its Kueue objects; Ready says so on success.
func (r *PlatformReconciler) applyPolicy(ctx context.Context, p *taugridv1.TauPlatform, commit string) error {
	lp, err := r.Policies.Load(ctx, p, commit)
	if err != nil {
		return err
	}
	objs, err := policy.LoadQueues(lp.Tree, lp.Policy)
	declared := slices.Clone(objs) // the repo's own queues, before TauGrid adds to them
	if err == nil {
		err = policy.CheckTopologyNodes(ctx, r.Client, lp.Policy)
	}
	if err == nil {
		objs, err = withHostSlots(lp.Policy, objs)
	}
	if err == nil && r.AdmissionCheck {
		objs, err = withPolicyCheck(p, objs)
	}
	if err == nil { // after the check: the workers' queues carry it too
		objs, err = r.dispatch(ctx, p, lp, objs)
	}
	kueueObjects := len(objs)
	if err == nil {
		err = located(lp.Tree, r.applyQueues(ctx, p, append(objs, r.Secrets.bindings(lp.Policy)...)))
	}
	if err != nil {
		return err
	}
	r.explainChange(ctx, p, p.Status.Commit, commit, lp, declared)
	p.Status.Commit, p.Status.PolicyDigest = commit, lp.Policy.Digest
	msg := fmt.Sprintf("policy at %s applied: %d tenants, %d profiles, %d Kueue objects", shared.Short(commit), len(lp.Policy.Tenants), len(lp.Policy.Profiles), kueueObjects)
	apimeta.RemoveStatusCondition(&p.Status.Conditions, taugridv1.ConditionStalled)
	r.setCondition(p, taugridv1.ConditionReady, metav1.ConditionTrue, ReasonPolicyApplied, msg)
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, ReasonPolicyApplied, "Apply", "%s", msg)
	return nil
}

// invalid reports a commit whose policy was refused.
func (r *PlatformReconciler) invalid(p *taugridv1.TauPlatform, commit string, err error) {
	kept := "no policy is in force yet"
	if p.Status.Commit != "" {
		kept = "the policy at " + shared.Short(p.Status.Commit) + " stays in force"
	}
	msg := fmt.Sprintf("commit %s refused (%s):\n%v", shared.Short(commit), kept, err)
	r.setCondition(p, taugridv1.ConditionStalled, metav1.ConditionTrue, ReasonInvalidPolicy, msg)
	if p.Status.Commit == "" {
		r.setCondition(p, taugridv1.ConditionReady, metav1.ConditionFalse, ReasonInvalidPolicy, msg)
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonInvalidPolicy, "Validate", "%s", strings.ReplaceAll(msg, "\n", "; "))
}

// applyQueues makes the cluster hold exactly the repo's Kueue objects.
// Tenant namespaces are created first: they are only ever added, and the
// objects inside them cannot be checked before they exist. Every other
// object is then checked by a server-side dry run, so the commit applies
// whole or not at all; then applied; then what this platform applied before
// and the repo no longer declares is pruned.
func (r *PlatformReconciler) applyQueues(ctx context.Context, p *taugridv1.TauPlatform, objs []*unstructured.Unstructured) error {
	var namespaces, rest []*unstructured.Unstructured
	for _, u := range objs {
		labelPlatform(u, p)
		if u.GetKind() == "Namespace" {
			namespaces = append(namespaces, u)
		} else {
			rest = append(rest, u)
		}
	}
	for _, step := range []struct {
		objs   []*unstructured.Unstructured
		dryRun bool
	}{{namespaces, false}, {rest, true}, {rest, false}} {
		for _, u := range step.objs {
			if err := r.apply(ctx, u, step.dryRun); err != nil {
				return err
			}
		}
	}
	return r.prune(ctx, p, objs)
}

func (r *PlatformReconciler) apply(ctx context.Context, u *unstructured.Unstructured, dryRun bool) error {
	if err := r.checkOwner(ctx, u); err != nil {
		return err
	}
	opts := []client.ApplyOption{client.FieldOwner(PlatformFieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), opts...); err != nil {
		return &objectError{obj: u, err: err}
	}
	return nil
}

// objectError is the API server's (or Kueue's) refusal of one object.
type objectError struct {
	obj *unstructured.Unstructured
	err error
	// at is where the platform repo declares the object ("file:line");
	// hint says what to do instead, where the refusal is of a kind
	// TauGrid knows.
	at, hint string
}

func (e *objectError) Error() string {
	msg := fmt.Sprintf("%s %s: %v", e.obj.GetKind(), qualifiedName(e.obj), e.err)
	if e.at != "" {
		msg = e.at + ": " + msg
	}
	if e.hint != "" {
		msg += "; " + e.hint
	}
	return msg
}

func (e *objectError) Unwrap() error { return e.err }

// located names the platform repo's file and line of an object the cluster
// refused and, for a field Kueue never changes in place (a flavor's
// topologyName or nodeLabels, a Topology's levels), what to do instead.
func located(tree fs.FS, err error) error {
	var oe *objectError
	if !errors.As(err, &oe) {
		return err
	}
	u := oe.obj
	if file, line, ok := policy.Locate(tree, u.GetKind(), u.GetNamespace(), u.GetName()); ok {
		oe.at = fmt.Sprintf("%s:%d", file, line)
	}
	if apierrors.IsInvalid(oe.err) && strings.Contains(oe.err.Error(), "immutable") {
		oe.hint = fmt.Sprintf("Kueue never changes this field of an existing %s: declare the changed one under a new name, point the ClusterQueues at it, and remove the old one (docs/platform.md, \"Switching topology placement off and on\")", u.GetKind())
	}
	return err
}

// checkOwner refuses to take over an object another TauPlatform applied.
func (r *PlatformReconciler) checkOwner(ctx context.Context, u *unstructured.Unstructured) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(u.GroupVersionKind())
	err := r.Get(ctx, client.ObjectKeyFromObject(u), cur)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if owner := cur.GetLabels()[taugridv1.LabelPlatform]; owner != "" && owner != u.GetLabels()[taugridv1.LabelPlatform] {
		return fmt.Errorf("%s %s is managed by TauPlatform %s", u.GetKind(), qualifiedName(u), owner)
	}
	return nil
}

func qualifiedName(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetName()
}

// prune deletes objects this platform applied that its repo dropped; it
// never touches objects without its label.
func (r *PlatformReconciler) prune(ctx context.Context, p *taugridv1.TauPlatform, keep []*unstructured.Unstructured) error {
	want := map[string]bool{}
	for _, u := range keep {
		want[u.GetKind()+"/"+qualifiedName(u)] = true
	}
	for _, gvk := range slices.Concat(policy.QueueKinds, dispatchKinds, grantKinds) {
		if !policy.Prunable(gvk) {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.List(ctx, list, client.MatchingLabels{taugridv1.LabelPlatform: p.Name}); err != nil {
			if apimeta.IsNoMatchError(err) {
				continue
			}
			return err
		}
		for i := range list.Items {
			u := &list.Items[i]
			if want[gvk.Kind+"/"+qualifiedName(u)] {
				continue
			}
			if err := client.IgnoreNotFound(r.Delete(ctx, u)); err != nil {
				return fmt.Errorf("pruning %s %s: %w", gvk.Kind, qualifiedName(u), err)
			}
		}
	}
	return nil
}

func (r *PlatformReconciler) setCondition(p *taugridv1.TauPlatform, t string, s metav1.ConditionStatus, reason, msg string) {
	shared.SetCondition(&p.Status.Conditions, p.Generation, r.Clock.Now(), t, s, reason, msg)
}

// SetupWithManager watches TauPlatforms: spec changes and nudges.
func (r *PlatformReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&taugridv1.TauPlatform{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(r)
}
