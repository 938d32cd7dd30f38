package forgestatus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/shared"
)

// ReasonForgeRejected: the forge refused a status, or its settings are
// unusable; a human must act.
const ReasonForgeRejected = "ForgeRejected"

// Timing of commit status posts.
const (
	// ProgressInterval is the least time between two progress (non-final)
	// posts of one run: a long queue must not burn the forge's quota.
	ProgressInterval = time.Minute
	// ForgeSettingsRetry is how soon unusable forge settings (no Secret, a
	// refused token) are tried again, so a fixed setting still gets the
	// final status posted.
	ForgeSettingsRetry = 10 * time.Minute
)

// ForgeReconciler reports each run's state as a commit status on the forge
// of its repository, when the repository's spec.forge asks for it.
type ForgeReconciler struct {
	client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// Posters builds the forge clients and holds the forge Secrets read;
	// nil: one of the reconciler's own, reading through Client.
	Posters *forge.Posters
	// Workers is how many runs' statuses are posted at once; 0 means
	// DefaultForgeWorkers.
	Workers int
	// APIReader reads a run from the API server when the cache shows its
	// post in flight: nil reads the cache again.
	APIReader client.Reader
	// Written records the run status writes of this process, shared with
	// the other controllers that write a run's status; nil: a record of
	// this reconciler's own writes only.
	Written *shared.Written

	ownPosters sync.Once
}

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns/status,verbs=get;patch
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories,verbs=get;list;watch
// Secrets (in the repository's namespace) are read through the platform's
// SecretsGrant.

// Reconcile posts the run's desired status when it differs from the last
// one posted, recorded in status.forge. The record is written before the
// post, on the run's resourceVersion: a reconcile working from an older
// copy of the run (the cache lags behind the API server) fails that write
// and posts nothing, and a post whose outcome is unknown (a restart, a
// timeout) is settled by reading the forge before posting again.
//
// The run and its repository are read as the cache holds them, not copied
// (hack/scale: 18% of the controller's CPU was copies of TauRuns read
// here, most reconciles finding the status already posted). Neither is
// modified: the run is copied before the post path writes to it, and the
// repository is only read.
func (r *ForgeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cached := &taugridv1.TauRun{}
	if err := r.Get(ctx, req.NamespacedName, cached, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !cached.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: cached.Namespace, Name: cached.Spec.Repository}, repo, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if repo.Spec.Forge == nil {
		return reconcile.Result{}, nil
	}
	if shared.WrittenOf(&r.Written).Lags(cached, r.Clock.Now()) {
		// A copy this process's status write replaced: settling or posting
		// from it would read the forge, or be refused (409) at the record
		// of a post in flight.
		return reconcile.Result{RequeueAfter: shared.WokenByTheWrite}, nil // or sooner: the write's watch event
	}
	if last := cached.Status.Forge; last != nil && last.InFlight && r.APIReader != nil {
		// Mostly the cache's lag, not a post whose outcome is unknown: the
		// reconcile that posted confirmed it, and the watch has not brought
		// that yet. Settling from this copy would read the forge, and spend
		// a token of the credential's pace, for a post already confirmed;
		// with the pace spent, the token set aside for that read is never
		// claimed once the run is found posted (the issue "Scale, next
		// round" saw taugrid_forge_posts_waiting at 42-56 with nothing
		// waiting). One read of the API server decides.
		fresh := &taugridv1.TauRun{}
		if err := r.APIReader.Get(ctx, req.NamespacedName, fresh); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		cached = fresh
	}
	want := forge.Desired(cached)
	if last := cached.Status.Forge; last == nil || !last.InFlight {
		if alreadyPosted(last, want) {
			return reconcile.Result{}, nil
		}
		if wait := progressWait(last, want, r.Clock.Now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	return r.reconcilePost(ctx, cached.DeepCopy(), repo, want)
}

// alreadyPosted says whether the forge already shows want.
func alreadyPosted(last *taugridv1.ForgeStatus, want forge.Status) bool {
	return last != nil && last.Context == want.Context && last.State == string(want.State) &&
		last.Description == want.Description && last.TargetURL == want.TargetURL
}

// progressWait is how long a post must wait so that refreshes within one
// phase (a queue position, a new estimate) go at most once per
// progressInterval. A new phase, a final state and the first explanation
// that replaces a phase's generic line never wait.
func progressWait(last *taugridv1.ForgeStatus, want forge.Status, now time.Time) time.Duration {
	if last == nil || want.State.Final() || string(last.Phase) != want.Phase || last.Context != want.Context ||
		(want.Generic != "" && last.Description == want.Generic) {
		return 0
	}
	return max(0, last.PostedAt.Add(ProgressInterval).Sub(now))
}

// reconcilePost records want as in flight, posts it and records the
// outcome. Rate limits requeue after the forge's wait; settings a human
// must fix raise a Warning event and retry slowly; other errors return for
// backoff. run is the reconciler's own copy; repo is the cache's, read
// only.
func (r *ForgeReconciler) reconcilePost(ctx context.Context, run *taugridv1.TauRun, repo *taugridv1.TauRepository, want forge.Status) (reconcile.Result, error) {
	checkRuns := repo.Spec.Forge.CheckRuns && repo.Spec.Forge.Type == taugridv1.ForgeType(forge.GitHub)
	last := run.Status.Forge
	if checkRuns && last != nil && last.Context == want.Context {
		want.CheckRunID = last.CheckRunID
	}
	poster, err := r.posters().For(ctx, repo, &want, checkRuns)
	if err == nil {
		var done bool
		if done, err = r.settle(ctx, run, poster, &want, checkRuns); err == nil && !done {
			err = r.post(ctx, run, poster, want, checkRuns)
		}
	}
	if err == nil || errors.Is(err, errStale) {
		return reconcile.Result{}, nil
	}
	if _, budget := forge.RetryAfter(err); !budget {
		r.posters().Forget(types.NamespacedName{Namespace: repo.Namespace, Name: repo.Spec.Forge.SecretRef.Name})
	}
	return r.postError(run, want, err)
}

// errStale: the run changed since it was read; its watch event brings a
// fresh reconcile.
var errStale = errors.New("the run changed since it was read")

// settle asks the forge what a post in flight left on the commit. If the
// commit already shows want, it records that and reports done; a check
// run found there is updated from now on, not created again.
func (r *ForgeReconciler) settle(ctx context.Context, run *taugridv1.TauRun, poster forge.StatusPoster, want *forge.Status, checkRuns bool) (bool, error) {
	if last := run.Status.Forge; last == nil || !last.InFlight {
		return false, nil
	}
	shown, same, err := poster.Shows(ctx, *want)
	if err != nil {
		return false, err
	}
	if !checkRuns {
		shown.ID = 0
	} else if want.CheckRunID == 0 {
		want.CheckRunID = shown.ID
	}
	if !same {
		return false, nil
	}
	return true, r.confirm(ctx, run, forgeRecord(*want, r.Clock.Now(), false), shown)
}

// post records want as in flight (failing with errStale when the run
// changed since it was read), posts it, and records that the forge took
// it. A post the forge surely refused puts the previous record back.
func (r *ForgeReconciler) post(ctx context.Context, run *taugridv1.TauRun, poster forge.StatusPoster, want forge.Status, checkRuns bool) error {
	if t, ok := poster.(forge.Taker); ok {
		if err := t.Take(want); err != nil {
			return err // the forge's budget is spent: nothing written, nothing to restore
		}
	}
	previous := run.Status.Forge.DeepCopy()
	base := run.DeepCopy()
	run.Status.Forge = forgeRecord(want, r.Clock.Now(), true)
	if err := r.patchStatus(ctx, base, run, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), true); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errStale
		}
		return err
	}
	posted, err := poster.Post(ctx, want)
	if err != nil {
		if forge.Refused(err) {
			err = errors.Join(err, r.restore(ctx, run, previous))
		}
		return err
	}
	if !checkRuns {
		posted.ID = 0
	}
	return r.confirm(ctx, run, run.Status.Forge, posted)
}

// forgeRecord is status.forge for s, posted (or begun) at now.
func forgeRecord(s forge.Status, now time.Time, inFlight bool) *taugridv1.ForgeStatus {
	return &taugridv1.ForgeStatus{Context: s.Context, State: string(s.State), Description: s.Description,
		TargetURL: s.TargetURL, Phase: taugridv1.RunPhase(s.Phase), PostedAt: metav1.NewTime(now), InFlight: inFlight,
		CheckRunID: s.CheckRunID}
}

// confirm records that the forge shows rec. Only this reconciler writes
// status.forge, one reconcile per run at a time, so no lock is needed.
func (r *ForgeReconciler) confirm(ctx context.Context, run *taugridv1.TauRun, rec *taugridv1.ForgeStatus, p forge.Posted) error {
	base := run.DeepCopy()
	run.Status.Forge = rec.DeepCopy()
	run.Status.Forge.InFlight = false
	if p.ID != 0 {
		run.Status.Forge.CheckRunID = p.ID
	}
	return client.IgnoreNotFound(r.patchStatus(ctx, base, run, client.MergeFrom(base), false))
}

// restore puts back the record a refused post replaced. If that fails the
// record stays in flight, and the next reconcile asks the forge; the
// failure is returned with the refusal.
func (r *ForgeReconciler) restore(ctx context.Context, run *taugridv1.TauRun, previous *taugridv1.ForgeStatus) error {
	base := run.DeepCopy()
	run.Status.Forge = previous
	if err := r.patchStatus(ctx, base, run, client.MergeFrom(base), false); err != nil {
		return fmt.Errorf("restoring the record of the last post: %w", err)
	}
	return nil
}

// patchStatus writes run's status by patch p and records the write,
// holding the run (shared.Written): a locked patch is not sent from a
// copy a write of this process replaced; an unlocked one (status.forge
// alone, which only this reconciler writes) is sent whatever the copy.
func (r *ForgeReconciler) patchStatus(ctx context.Context, base, run *taugridv1.TauRun, p client.Patch, locked bool) error {
	written := shared.WrittenOf(&r.Written)
	var release func()
	var err error
	if locked {
		release, err = written.Guard(ctx, run, r.Clock.Now())
	} else {
		release, err = written.HoldWrite(ctx, run)
	}
	if err != nil {
		return err
	}
	defer release()
	if err := r.Status().Patch(ctx, run, p); err != nil {
		return err
	}
	shared.WrittenOf(&r.Written).Note(run, base.ResourceVersion, r.Clock.Now())
	return nil
}

// postError classifies a failed post.
func (r *ForgeReconciler) postError(run *taugridv1.TauRun, want forge.Status, err error) (reconcile.Result, error) {
	if wait, ok := forge.RetryAfter(err); ok {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	var ae *forge.APIError
	if errors.Is(err, gitsource.ErrMissingSecret) || forge.IsTerminal(err) {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, ReasonForgeRejected, "PostStatus", "posting %s status: %s", want.State, err)
		if errors.As(err, &ae) && ae.StatusCode == http.StatusUnprocessableEntity {
			return reconcile.Result{}, nil // e.g. the forge's cap of statuses per context
		}
		return reconcile.Result{RequeueAfter: ForgeSettingsRetry}, nil
	}
	return reconcile.Result{}, fmt.Errorf("posting %s status: %w", want.State, err)
}

// posters is r.Posters, or the reconciler's own when it has none.
func (r *ForgeReconciler) posters() *forge.Posters {
	r.ownPosters.Do(func() {
		if r.Posters == nil {
			r.Posters = &forge.Posters{Reader: r.Client, Clock: r.Clock}
		}
	})
	return r.Posters
}

// SetupWithManager registers the reconciler: every change of a TauRun,
// status included, may change what its commit shows.
func (r *ForgeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("taurun-forge").
		For(&taugridv1.TauRun{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, DefaultForgeWorkers)}).
		Complete(r)
}
