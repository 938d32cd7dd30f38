package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// Reasons of TauRepository conditions and events.
const (
	ReasonPolled         = "Polled"
	ReasonRunRequested   = "RunRequested"
	ReasonRunCancelled   = "RunCancelled"
	ReasonBadRunRequest  = "BadRunRequest"
	ReasonNotAllowed     = "RepositoryNotAllowed"
	ReasonMissingSecret  = "MissingSecret"
	ReasonWaitingPolicy  = "WaitingForPolicy"
	ReasonInvalidTrigger = "InvalidTriggers"
	ReasonValidateFailed = "PullRequestValidationFailed"
	// ReasonRunRefused: the API server refused the TauRun a ref requests.
	ReasonRunRefused = "RunRefused"
)

// RepositoryReconciler polls a research repository and turns what changed
// into TauRuns: one per (repository, ref, commit, target), created only if
// absent, and marked cancelled when its ref is deleted.
type RepositoryReconciler struct {
	client.Client
	Git      policy.Git
	Policies policy.PolicyProvider
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// PullRequests validates pull requests of repositories with a forge;
	// nil validates none.
	PullRequests *PullRequests
	// Workers is how many repositories are polled at once; 0 means
	// DefaultRepositoryWorkers.
	Workers int
}

// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories/status,verbs=get;patch
// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns,verbs=get;list;watch;create;patch
// Secrets (in the repository's namespace) are read through the platform's
// SecretsGrant.

// Reconcile polls the repository once and requeues after its interval.
func (r *RepositoryReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, req.NamespacedName, repo); err != nil {
		if apierrors.IsNotFound(err) && r.PullRequests != nil {
			r.PullRequests.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !repo.DeletionTimestamp.IsZero() || repo.Spec.Suspend {
		return reconcile.Result{}, nil
	}
	base := repo.DeepCopy()
	err := r.reconcile(ctx, repo)
	if shared.Handled(err) {
		// A poll that failed half way leaves the generation to do again:
		// the next one still takes a newly watched branch as history.
		repo.Status.ObservedGeneration = repo.Generation
	}
	repo.Status.LastHandledNudge = repo.Annotations[taugridv1.AnnotationNudge]
	if !equality.Semantic.DeepEqual(base.Status, repo.Status) {
		if perr := r.Status().Patch(ctx, repo, client.MergeFrom(base)); perr != nil {
			return reconcile.Result{}, perr
		}
	}
	return shared.Finish(reconcile.Result{RequeueAfter: shared.Jitter(repo.Spec.Interval.Duration)}, err)
}

// reconcile publishes the webhook path, checks access, polls, and
// validates pull requests.
func (r *RepositoryReconciler) reconcile(ctx context.Context, repo *taugridv1.TauRepository) error {
	if err := r.reconcileWebhook(ctx, repo); err != nil {
		return err
	}
	remote, err := r.reconcileAccess(ctx, repo)
	if err != nil {
		return err
	}
	listed, err := r.reconcilePoll(ctx, repo, remote)
	if !shared.Handled(err) {
		return err
	}
	if r.PullRequests != nil && repo.Spec.Forge != nil {
		if perr := r.PullRequests.reconcilePullRequests(ctx, repo, remote, listed); perr != nil {
			r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, ReasonValidateFailed, "Validate", "validating pull requests: %v", perr)
		}
	}
	return err
}

// reconcileAccess checks that the tenant may register this URL and reads
// its credentials. Sets Stalled (a terminal error) when a human must act,
// and waits while the platform has no policy yet.
func (r *RepositoryReconciler) reconcileAccess(ctx context.Context, repo *taugridv1.TauRepository) (gitsource.Remote, error) {
	pol, _, err := r.Policies.Policy(ctx, repo.Spec.Platform)
	if errors.Is(err, policy.ErrNoPolicyYet) || apierrors.IsNotFound(err) {
		r.setCondition(repo, taugridv1.ConditionReady, metav1.ConditionFalse, ReasonWaitingPolicy, err.Error())
		return gitsource.Remote{}, shared.Waiting(shared.Jitter(repo.Spec.Interval.Duration), err)
	}
	if err != nil {
		return gitsource.Remote{}, err
	}
	tenant := pol.TenantForNamespace(repo.Namespace)
	switch {
	case tenant == nil:
		return gitsource.Remote{}, r.stall(repo, ReasonNotAllowed, fmt.Sprintf("namespace %s belongs to no tenant of platform %s", repo.Namespace, repo.Spec.Platform))
	case !tenant.AllowsRepository(repo.Spec.URL):
		return gitsource.Remote{}, r.stall(repo, ReasonNotAllowed, fmt.Sprintf("tenant %s may not register %s; its policy allows %v", tenant.Name, repo.Spec.URL, tenant.Repositories))
	}
	if err := triggersOf(repo).Validate(); err != nil {
		return gitsource.Remote{}, r.stall(repo, ReasonInvalidTrigger, err.Error())
	}
	remote, err := policy.RemoteFor(ctx, r.Client, repo.Namespace, repo.Spec.GitSource)
	if errors.Is(err, gitsource.ErrMissingSecret) {
		return gitsource.Remote{}, r.stall(repo, ReasonMissingSecret, err.Error())
	}
	if err == nil {
		// Nothing of the access stalls it any more: a human fixed it.
		apimeta.RemoveStatusCondition(&repo.Status.Conditions, taugridv1.ConditionStalled)
	}
	return remote, err
}

func triggersOf(repo *taugridv1.TauRepository) gitsource.Triggers {
	t := repo.Spec.Triggers
	return gitsource.Triggers{RunTags: t.RunTags, RunRefPrefix: t.RunRefPrefix, Branches: t.Branches}.WithDefaults()
}

// reconcilePoll lists the repository, starts and cancels runs for what
// changed, and records the refs seen. Runs are created before the refs are
// recorded, so a crash in between repeats the (idempotent) creations rather
// than losing a run. Sets Ready. It returns every ref listed (nil when the
// listing failed), for the pull requests' validation.
func (r *RepositoryReconciler) reconcilePoll(ctx context.Context, repo *taugridv1.TauRepository, remote gitsource.Remote) (gitsource.RefSet, error) {
	t := triggersOf(repo)
	prev, err := r.previousRefs(ctx, repo, remote, t)
	if err != nil {
		return nil, r.gitFailed(repo, err)
	}
	runRefs := &runRefPoll{r: r, repo: repo}
	res, err := r.Git.PollFrom(ctx, remote, runRefs.previous(ctx, prev, t), t)
	if ce := (*clusterError)(nil); errors.As(err, &ce) {
		return nil, err // the API server's, not git's: retried with backoff
	}
	if err != nil {
		return nil, r.gitFailed(repo, err)
	}
	keepRefused(repo, res.Refs)
	var requested []string // the runs this poll created, for its one event
	defer func() { r.announceRequested(repo, requested) }()
	for _, ev := range append(runRefs.cancels, res.Events...) {
		run, err := r.handle(ctx, repo, ev)
		var refused *refusedRun
		if errors.As(err, &refused) {
			r.Refuse(repo, gitsource.Problem{Ref: ev.Ref, SHA: res.Refs[ev.Ref].SHA, Commit: ev.Commit, Err: refused}, ReasonRunRefused)
			continue
		}
		if err != nil {
			return res.Listed, err
		}
		runRefs.ran(ev)
		if run != "" {
			requested = append(requested, run)
		}
	}
	for _, p := range res.Problems {
		r.Refuse(repo, p, ReasonBadRunRequest)
	}
	r.SetRefusedCondition(repo)
	refs := observedRefs(t.WatchedBranches(res.Refs))
	ledger := runRefs.record(res.Refs, t)
	// An idle poll writes nothing: with thousands of repositories, a status
	// write per poll would load the API server for no news. The poll time
	// is refreshed when the refs change, and at least every 10 intervals.
	last := repo.Status.LastPollTime
	if last == nil || !equality.Semantic.DeepEqual(refs, repo.Status.ObservedRefs) || !equality.Semantic.DeepEqual(ledger, repo.Status.RunRefs) ||
		r.Clock.Since(last.Time) >= 10*repo.Spec.Interval.Duration {
		now := metav1.NewTime(r.Clock.Now())
		repo.Status.LastPollTime = &now
	}
	repo.Status.ObservedRefs = refs
	repo.Status.RunRefs = ledger
	repo.Status.RefCount = len(res.Refs)
	apimeta.RemoveStatusCondition(&repo.Status.Conditions, taugridv1.ConditionStalled)
	ready := fmt.Sprintf("watching %d refs", len(res.Refs))
	if n := len(repo.Status.RefusedRefs); n > 0 {
		ready += fmt.Sprintf("; %d refused (condition %s)", n, taugridv1.ConditionRefsRefused)
	}
	r.setCondition(repo, taugridv1.ConditionReady, metav1.ConditionTrue, ReasonPolled, ready)
	return res.Listed, nil
}

// RequestsNamed is how many of a poll's requested runs its event names;
// the rest are counted. An event's note holds at most 1 KiB.
const RequestsNamed = 5

// announceRequested records the runs one poll created as one event on the
// repository, not one each: events were the API server's busiest writes
// in hack/scale (69 of 278 requests a second), four in ten of them a run
// requested. Each run's own events (Submitted, its phases) still name it.
func (r *RepositoryReconciler) announceRequested(repo *taugridv1.TauRepository, requested []string) {
	if len(requested) == 0 {
		return
	}
	named := requested[:min(len(requested), RequestsNamed)]
	note := strings.Join(named, "; ")
	if more := len(requested) - len(named); more > 0 {
		note += fmt.Sprintf("; and %d more (kubectl get tauruns -l %s=%s)", more, render.LabelRepository, repo.Name)
	}
	runs := "runs"
	if len(requested) == 1 {
		runs = "run"
	}
	r.Recorder.Eventf(repo, nil, corev1.EventTypeNormal, ReasonRunRequested, "Poll", "%d %s requested: %s", len(requested), runs, note)
}

// previousRefs is what the last poll saw. On the first poll everything
// already there except run refs counts as seen; after the triggers changed,
// so does the current head of a branch that just became watched.
func (r *RepositoryReconciler) previousRefs(ctx context.Context, repo *taugridv1.TauRepository, remote gitsource.Remote, t gitsource.Triggers) (gitsource.RefSet, error) {
	first := repo.Status.LastPollTime == nil
	prev := gitsource.RefSet{}
	for _, o := range repo.Status.ObservedRefs {
		prev[o.Name] = gitsource.Ref{SHA: o.SHA, Peeled: o.Peeled}
	}
	if !first && repo.Status.ObservedGeneration == repo.Generation {
		return prev, nil
	}
	cur, err := r.Git.ListRefs(ctx, remote)
	if err != nil {
		return nil, err
	}
	for name, ref := range t.Baseline(cur) {
		if _, seen := prev[name]; !seen && (first || strings.HasPrefix(name, "refs/heads/")) {
			prev[name] = ref
		}
	}
	return prev, nil
}

func observedRefs(refs gitsource.RefSet) []taugridv1.ObservedRef {
	out := make([]taugridv1.ObservedRef, 0, len(refs))
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		out = append(out, taugridv1.ObservedRef{Name: name, SHA: refs[name].SHA, Peeled: refs[name].Peeled})
	}
	return out
}

// gitFailed reports a failed poll: transient failures are retried with
// backoff, others (terminal) wait for the next interval.
func (r *RepositoryReconciler) gitFailed(repo *taugridv1.TauRepository, err error) error {
	r.setCondition(repo, taugridv1.ConditionReady, metav1.ConditionFalse, shared.ReasonGitUnavailable, err.Error())
	if gitsource.Transient(err) {
		return err
	}
	return shared.Terminal(err)
}

// handle creates the run an event requests, or cancels the runs of a
// deleted ref. It returns what it created, for instance "tag run/x at
// 1a2b3c4 (target train): TauRun r-1", or "" when it created nothing.
func (r *RepositoryReconciler) handle(ctx context.Context, repo *taugridv1.TauRepository, ev gitsource.Event) (string, error) {
	if ev.Kind == gitsource.KindCancel {
		return "", r.cancelRuns(ctx, repo, ev)
	}
	run := NewRun(repo, ev)
	if err := r.verifySignature(ctx, repo, ev, run); err != nil {
		return "", err
	}
	err := r.Create(ctx, run)
	switch {
	case apierrors.IsAlreadyExists(err):
		return "", nil
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		// Terminal for this ref only: no retry makes the server accept it.
		return "", &refusedRun{name: run.Name, err: err}
	case err != nil:
		return "", fmt.Errorf("creating TauRun %s: %w", run.Name, err)
	}
	return fmt.Sprintf("%s %s at %s (target %s): TauRun %s", ev.Kind, ev.Ref, shared.Short(ev.Commit), run.Spec.Target, run.Name), nil
}

// NewRun is the TauRun for an event, with its deterministic name.
func NewRun(repo *taugridv1.TauRepository, ev gitsource.Event) *taugridv1.TauRun {
	target := ev.Target
	if target == "" {
		target = "default"
	}
	return &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{
			Name:      runs.RunName(repo.Name, ev.Ref, ev.Commit, target),
			Namespace: repo.Namespace,
			Labels: map[string]string{
				render.LabelRepository: repo.Name,
				render.LabelManagedBy:  render.ManagedBy,
				taugridv1.LabelRefHash: runs.RefHash(ev.Ref),
				taugridv1.LabelCommit:  ev.Commit,
			},
			Annotations: map[string]string{AnnotationRefObject: refObject(ev)},
		},
		Spec: taugridv1.TauRunSpec{
			Repository: repo.Name,
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerKind(ev.Kind), Ref: ev.Ref,
				Requester: ev.Requester, Overrides: ev.Overrides},
			Commit: ev.Commit,
			Target: target,
		},
	}
}

// cancelRuns marks every unfinished run of a deleted ref for cancellation.
func (r *RepositoryReconciler) cancelRuns(ctx context.Context, repo *taugridv1.TauRepository, ev gitsource.Event) error {
	var list taugridv1.TauRunList
	if err := r.List(ctx, &list, client.InNamespace(repo.Namespace), client.MatchingLabels{
		render.LabelRepository: repo.Name, taugridv1.LabelRefHash: runs.RefHash(ev.Ref), taugridv1.LabelCommit: ev.Commit}); err != nil {
		return err
	}
	for i := range list.Items {
		run := &list.Items[i]
		if run.Spec.Cancel || run.Status.Phase.Final() {
			continue
		}
		patch := client.MergeFrom(run.DeepCopy())
		run.Spec.Cancel = true
		if err := r.Patch(ctx, run, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.Recorder.Eventf(repo, run, corev1.EventTypeNormal, ReasonRunCancelled, "Poll", "%s was deleted: cancelling TauRun %s", ev.Ref, run.Name)
	}
	return nil
}

func (r *RepositoryReconciler) stall(repo *taugridv1.TauRepository, reason, msg string) error {
	r.setCondition(repo, taugridv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	r.setCondition(repo, taugridv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	return shared.Terminal(errors.New(msg))
}

func (r *RepositoryReconciler) setCondition(repo *taugridv1.TauRepository, t string, s metav1.ConditionStatus, reason, msg string) {
	shared.SetCondition(&repo.Status.Conditions, repo.Generation, r.Clock.Now(), t, s, reason, msg)
}

// SetupWithManager watches TauRepositories: spec changes and nudges.
func (r *RepositoryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&taugridv1.TauRepository{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, DefaultRepositoryWorkers)}).
		Complete(r)
}
