package forgestatus

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// RefusalReporter posts a failure status on the commit of each refused ref
// (status.refusedRefs), naming the ref and why, where its author looks. It
// posts each refusal once: the refusal is claimed in
// status.reportedRefusals with an optimistic lock before the post, so a
// stale cache conflicts instead of posting twice. Kept apart from the run
// statuses' ForgeReconciler, with whom it shares the Posters.
type RefusalReporter struct {
	client.Client
	Posters  *forge.Posters
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories/status,verbs=get;patch

// Reconcile posts the refusals of a repository with a forge not posted yet.
func (r *RefusalReporter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, req.NamespacedName, repo); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !repo.DeletionTimestamp.IsZero() || repo.Spec.Forge == nil {
		return reconcile.Result{}, nil
	}
	for _, rf := range repo.Status.RefusedRefs {
		if slices.Contains(repo.Status.ReportedRefusals, refusalKey(rf)) {
			continue
		}
		if err := r.claim(ctx, repo, refusalKey(rf)); apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil // the cache lags: read again
		} else if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.post(ctx, repo, rf); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// claim records key as reported, dropping keys of refusals gone since.
func (r *RefusalReporter) claim(ctx context.Context, repo *taugridv1.TauRepository, key string) error {
	base := repo.DeepCopy()
	current := map[string]bool{}
	for _, rf := range repo.Status.RefusedRefs {
		current[refusalKey(rf)] = true
	}
	kept := slices.DeleteFunc(slices.Clone(repo.Status.ReportedRefusals), func(k string) bool { return !current[k] })
	repo.Status.ReportedRefusals = append(kept, key)
	return r.Status().Patch(ctx, repo, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// post sends the failure status. Settings a human must fix raise a Warning
// and are not retried (the refusal stays on the repository's status and
// condition); other failures give the claim back and return for backoff.
func (r *RefusalReporter) post(ctx context.Context, repo *taugridv1.TauRepository, rf taugridv1.RefusedRef) error {
	s := RefusalStatus(rf)
	poster, err := r.Posters.For(ctx, repo, &s, false)
	if err == nil {
		_, err = poster.Post(ctx, s)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, gitsource.ErrMissingSecret) || forge.IsTerminal(err) {
		r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, ReasonForgeRejected, "PostStatus", "posting the refusal of %s: %s", rf.Ref, err)
		return nil
	}
	if uerr := r.unclaim(ctx, repo, refusalKey(rf)); uerr != nil {
		return errors.Join(err, uerr)
	}
	return err
}

func (r *RefusalReporter) unclaim(ctx context.Context, repo *taugridv1.TauRepository, key string) error {
	base := repo.DeepCopy()
	repo.Status.ReportedRefusals = slices.DeleteFunc(repo.Status.ReportedRefusals, func(k string) bool { return k == key })
	return client.IgnoreNotFound(r.Status().Patch(ctx, repo, client.MergeFrom(base)))
}

// RefusalStatus is the commit status of a refused ref: a failure in its
// own context, saying which ref asked for what and why it will not run.
func RefusalStatus(rf taugridv1.RefusedRef) forge.Status {
	name := strings.TrimPrefix(strings.TrimPrefix(rf.Ref, taugridv1.RunRefPrefix), "refs/")
	return forge.Status{
		SHA:         rf.Commit,
		Context:     forge.Shorten("tau/"+name, 100),
		State:       forge.StateFailure,
		Description: forge.Shorten(rf.Ref+" will not run: "+rf.Message, forge.MaxDescription),
		Summary:     "**" + rf.Ref + "** will not run:\n\n" + rf.Message + "\n\nFix it and push the ref again, or delete it.",
	}
}

func refusalKey(rf taugridv1.RefusedRef) string { return rf.Ref + "@" + rf.SHA }

// SetupWithManager watches TauRepositories: a refusal appears in status.
func (r *RefusalReporter) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("taurepository-refusals").
		For(&taugridv1.TauRepository{}).
		Complete(r)
}
