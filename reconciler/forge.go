package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/reconciler/forge"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ReasonForgeRejected: the forge refused a status, or its settings are
// unusable; a human must act.
const ReasonForgeRejected = "ForgeRejected"

// Timing of commit status posts.
const (
	// progressInterval is the least time between two progress (non-final)
	// posts of one run: a long queue must not burn the forge's quota.
	progressInterval = time.Minute
	// forgeSettingsRetry is how soon unusable forge settings (no Secret, a
	// refused token) are tried again, so a fixed setting still gets the
	// final status posted.
	forgeSettingsRetry = 10 * time.Minute
)

// ForgeReconciler reports each run's state as a commit status on the forge
// of its repository, when the repository's spec.forge asks for it.
type ForgeReconciler struct {
	client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// NewPoster builds a forge client; nil: forge.New.
	NewPoster func(forge.Config) (forge.StatusPoster, error)
	// HTTPClient is used for forge calls; nil: forge's default.
	HTTPClient *http.Client
	Metrics    *forge.Metrics
	// GitHubAPIURL is used when a github forge names no API URL.
	GitHubAPIURL string
	// AppTokens mints and caches GitHub App installation tokens for check
	// runs; nil mints one per post.
	AppTokens *forge.AppTokens
	// Buckets paces calls per credential; nil does not pace.
	Buckets *forge.Buckets
}

// Keys of a forge Secret for a GitHub App (spec.forge.checkRuns).
const (
	SecretAppID          = "appID"
	SecretInstallationID = "installationID"
	SecretPrivateKey     = "privateKey"
)

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns/status,verbs=get;patch
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconcile posts the run's desired status when it differs from the last
// one posted, recorded in status.forge.
func (r *ForgeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	run := &taugridv1.TauRun{}
	if err := r.Get(ctx, req.NamespacedName, run); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !run.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if repo.Spec.Forge == nil {
		return reconcile.Result{}, nil
	}
	want := forge.Desired(run)
	if alreadyPosted(run.Status.Forge, want) {
		return reconcile.Result{}, nil
	}
	if wait := progressWait(run.Status.Forge, want, r.Clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	return r.reconcilePost(ctx, run, repo, want)
}

// alreadyPosted says whether the forge already shows want.
func alreadyPosted(last *taugridv1.ForgeStatus, want forge.Status) bool {
	return last != nil && last.Context == want.Context && last.State == string(want.State) &&
		last.Description == want.Description && last.TargetURL == want.TargetURL
}

// progressWait is how long a progress post must wait so that a run posts
// at most one progress update per progressInterval. Final states never wait.
func progressWait(last *taugridv1.ForgeStatus, want forge.Status, now time.Time) time.Duration {
	if last == nil || want.State.Final() {
		return 0
	}
	return max(0, last.PostedAt.Add(progressInterval).Sub(now))
}

// reconcilePost posts want and records it in status.forge. Rate limits
// requeue after the forge's wait; settings a human must fix raise a Warning
// event and retry slowly; other errors return for backoff.
func (r *ForgeReconciler) reconcilePost(ctx context.Context, run *taugridv1.TauRun, repo *taugridv1.TauRepository, want forge.Status) (reconcile.Result, error) {
	checkRuns := repo.Spec.Forge.CheckRuns && repo.Spec.Forge.Type == taugridv1.ForgeType(forge.GitHub)
	if last := run.Status.Forge; checkRuns && last != nil && last.Context == want.Context {
		want.CheckRunID = last.CheckRunID
	}
	poster, err := r.posterFor(ctx, repo, &want, checkRuns)
	if err == nil {
		var posted forge.Posted
		if posted, err = poster.Post(ctx, want); err == nil {
			if !checkRuns {
				posted.ID = 0
			}
			return reconcile.Result{}, r.record(ctx, run, want, posted)
		}
	}
	if wait, ok := forge.RetryAfter(err); ok {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	var ae *forge.APIError
	if errors.Is(err, errMissingSecret) || forge.IsTerminal(err) {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, ReasonForgeRejected, "PostStatus", "posting %s status: %s", want.State, err)
		if errors.As(err, &ae) && ae.StatusCode == http.StatusUnprocessableEntity {
			return reconcile.Result{}, nil // e.g. the forge's cap of statuses per context
		}
		return reconcile.Result{RequeueAfter: forgeSettingsRetry}, nil
	}
	return reconcile.Result{}, fmt.Errorf("posting %s status: %w", want.State, err)
}

// posterFor reads the forge Secret and fills in the repository's owner and
// name.
func (r *ForgeReconciler) posterFor(ctx context.Context, repo *taugridv1.TauRepository, s *forge.Status, checkRuns bool) (forge.StatusPoster, error) {
	f := repo.Spec.Forge
	owner, name, root, err := forge.ParseRepoURL(repo.Spec.URL)
	if err != nil {
		return nil, err
	}
	s.Owner, s.Repo = owner, name
	var secret corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: f.SecretRef.Name}, &secret); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, fmt.Errorf("%w: %s/%s", errMissingSecret, repo.Namespace, f.SecretRef.Name)
		}
		return nil, err
	}
	cfg := forge.Config{Type: forge.Type(f.Type), APIURL: f.APIURL, Token: string(secret.Data[SecretToken]),
		HTTPClient: r.HTTPClient, Metrics: r.Metrics, Clock: r.Clock, CheckRuns: checkRuns, Buckets: r.Buckets}
	if cfg.APIURL == "" {
		cfg.APIURL = root
		if cfg.Type == forge.GitHub {
			cfg.APIURL = r.GitHubAPIURL
		}
	}
	if checkRuns {
		if cfg.Token, err = r.appToken(ctx, cfg.APIURL, secret.Data); err != nil {
			return nil, err
		}
	}
	newPoster := r.NewPoster
	if newPoster == nil {
		newPoster = forge.New
	}
	return newPoster(cfg)
}

// appToken returns an installation token of the GitHub App the Secret
// data describes.
func (r *ForgeReconciler) appToken(ctx context.Context, apiURL string, data map[string][]byte) (string, error) {
	appID, err1 := strconv.ParseInt(string(data[SecretAppID]), 10, 64)
	installation, err2 := strconv.ParseInt(string(data[SecretInstallationID]), 10, 64)
	if err1 != nil || err2 != nil || len(data[SecretPrivateKey]) == 0 {
		return "", &forge.ConfigError{Msg: "check runs need the Secret keys appID, installationID and privateKey"}
	}
	tokens := r.AppTokens
	if tokens == nil {
		tokens = &forge.AppTokens{HTTPClient: r.HTTPClient, Clock: r.Clock, Metrics: r.Metrics}
	}
	return tokens.Token(ctx, forge.App{APIURL: apiURL, AppID: appID, InstallationID: installation, PrivateKey: data[SecretPrivateKey]})
}

// record patches status.forge with what the forge accepted.
func (r *ForgeReconciler) record(ctx context.Context, run *taugridv1.TauRun, s forge.Status, p forge.Posted) error {
	base := run.DeepCopy()
	run.Status.Forge = &taugridv1.ForgeStatus{Context: s.Context, State: string(s.State), Description: s.Description,
		TargetURL: s.TargetURL, PostedAt: metav1.NewTime(r.Clock.Now()), CheckRunID: p.ID}
	return client.IgnoreNotFound(r.Status().Patch(ctx, run, client.MergeFrom(base)))
}

// SetupWithManager registers the reconciler: every change of a TauRun,
// status included, may change what its commit shows.
func (r *ForgeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("taurun-forge").
		For(&taugridv1.TauRun{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}
