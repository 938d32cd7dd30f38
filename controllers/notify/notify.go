// Package notify tells a repository's notification targets about its runs:
// a run that ended, failed, was preempted, waited too long in its queue or
// left its GPUs idle. Each notification is recorded on the run before it
// is sent, so none is sent twice, even across controller restarts; a
// failed delivery is retried with backoff, and one given up shows on the
// repository's status.
package notify

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/shared"
)

const (
	// DefaultWorkers is how many runs' notifications are sent at once.
	DefaultWorkers = 4
	// DefaultAfter is waitingAfter's and idleAfter's default.
	DefaultAfter = 30 * time.Minute
	// MaxTries is how many times one notification is sent before it is
	// given up.
	MaxTries = 6
	// Stale is how old an event may be and still be announced: a target
	// added today is not told of last month's runs, and a controller down
	// for longer than this does not flood it on its return.
	Stale = time.Hour
	// sendingGrace is how long a notification recorded as Sending is taken
	// for one in flight (or the cache's lag) before it is sent again.
	sendingGrace = time.Minute
)

// Reconciler sends each run's notifications to the targets its repository
// names.
type Reconciler struct {
	client.Client
	// APIReader reads the targets' Secrets (never cached) and a run whose
	// record the cache may not show yet.
	APIReader client.Reader
	Clock     clock.PassiveClock
	// Sender delivers; nil: one of the reconciler's own that refuses
	// private addresses.
	Sender *Sender
	// Workers is how many runs are handled at once; 0: DefaultWorkers.
	Workers int
	// Written records the run status writes of this process, shared with
	// the other controllers that write a run's status; nil: a record of
	// this reconciler's own writes only.
	Written *shared.Written
}

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns/status,verbs=get;patch
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories/status,verbs=get;patch
// Secrets (in the repository's namespace) are read through the platform's
// SecretsGrant.

// due is one notification that should be sent now.
type due struct {
	target taugridv1.NotificationTarget
	event  taugridv1.NotificationEvent
	key    string
}

// Reconcile sends the run's due notifications one by one, and asks to be
// called again when the next one falls due or a retry is.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// Read as the cache holds them: most runs' repositories name no
	// target, and copying every run read would cost more than the rest.
	cached := &taugridv1.TauRun{}
	if err := r.Get(ctx, req.NamespacedName, cached, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	sharedRepo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: cached.Namespace, Name: cached.Spec.Repository}, sharedRepo, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if len(sharedRepo.Spec.Notifications) == 0 || !cached.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if shared.WrittenOf(&r.Written).Lags(cached, r.Clock.Now()) {
		// A copy this process's status write replaced: the record of a
		// send would be refused (409).
		return reconcile.Result{RequeueAfter: shared.WokenByTheWrite}, nil // or sooner: the write's watch event
	}
	run, repo := cached.DeepCopy(), sharedRepo.DeepCopy()
	now := r.Clock.Now()
	dues, next := Due(run, repo.Spec.Notifications, now)
	var after time.Duration
	if !next.IsZero() {
		after = next.Sub(now)
	}
	for _, d := range dues {
		wait, err := r.notify(ctx, run, repo, d, now)
		if err != nil {
			return reconcile.Result{}, err
		}
		if wait > 0 && (after == 0 || wait < after) {
			after = wait
		}
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// notify sends d unless the run's record says it was; it returns how long
// until it should be tried again, 0 when done.
func (r *Reconciler) notify(ctx context.Context, run *taugridv1.TauRun, repo *taugridv1.TauRepository, d due, now time.Time) (time.Duration, error) {
	rec := record(run, d.key)
	switch {
	case rec == nil:
		rec = &taugridv1.NotificationRecord{Key: d.key}
	case rec.State == taugridv1.NotifyDelivered || rec.State == taugridv1.NotifyGivenUp:
		return 0, nil
	case rec.State == taugridv1.NotifySending && now.Sub(rec.Time.Time) < sendingGrace:
		return sendingGrace - now.Sub(rec.Time.Time), nil
	case rec.State == taugridv1.NotifyRetrying:
		if wait := rec.Time.Add(Backoff(rec.Tries)).Sub(now); wait > 0 {
			return wait, nil
		}
	}
	// Recorded first, on the run's resourceVersion: a reconcile working
	// from an older copy fails here and sends nothing.
	sending := *rec
	sending.State, sending.Time, sending.Tries = taugridv1.NotifySending, metav1.NewTime(now), rec.Tries+1
	if err := r.write(ctx, run, sending); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	err := r.send(ctx, run, repo, d)
	done := sending
	done.Time = metav1.NewTime(r.Clock.Now())
	switch {
	case err == nil:
		done.State, done.Message = taugridv1.NotifyDelivered, ""
	case sending.Tries >= MaxTries || !retryable(err):
		done.State, done.Message = taugridv1.NotifyGivenUp, err.Error()
	default:
		done.State, done.Message = taugridv1.NotifyRetrying, err.Error()
	}
	if werr := r.write(ctx, run, done); werr != nil {
		return 0, werr
	}
	if done.State != taugridv1.NotifyRetrying {
		if err := r.report(ctx, repo, d.target.Name, done); err != nil {
			return 0, err
		}
		return 0, nil
	}
	return Backoff(done.Tries), nil
}

// send delivers d's message to its target's URL.
func (r *Reconciler) send(ctx context.Context, run *taugridv1.TauRun, repo *taugridv1.TauRepository, d due) error {
	var s corev1.Secret
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: d.target.SecretRef}, &s); err != nil {
		return permanent(fmt.Errorf("reading Secret %s: %w", d.target.SecretRef, err))
	}
	url := string(s.Data[taugridv1.NotifyURLKey])
	if url == "" {
		return permanent(fmt.Errorf("the Secret %s has no %q", d.target.SecretRef, taugridv1.NotifyURLKey))
	}
	key := s.Data[taugridv1.NotifyHMACKey]
	format := cmp.Or(d.target.Format, taugridv1.NotifyFormatJSON)
	if format == taugridv1.NotifyFormatJSON && len(key) == 0 {
		return permanent(fmt.Errorf("the Secret %s has no %q to sign deliveries with", d.target.SecretRef, taugridv1.NotifyHMACKey))
	}
	msg := Message(run, d.event, r.Clock.Now())
	return r.sender().Send(ctx, url, key, format, DeliveryID(run, d.key), msg)
}

func (r *Reconciler) sender() *Sender {
	if r.Sender == nil {
		r.Sender = &Sender{}
	}
	return r.Sender
}

// write sets rec in the run's status, on the resourceVersion of run, and
// keeps run current for the next write.
func (r *Reconciler) write(ctx context.Context, run *taugridv1.TauRun, rec taugridv1.NotificationRecord) error {
	base := run.DeepCopy()
	i := slices.IndexFunc(run.Status.Notifications, func(n taugridv1.NotificationRecord) bool { return n.Key == rec.Key })
	if i < 0 {
		run.Status.Notifications = append(run.Status.Notifications, rec)
	} else {
		run.Status.Notifications[i] = rec
	}
	release, err := shared.WrittenOf(&r.Written).Guard(ctx, run, r.Clock.Now())
	if err != nil {
		return err
	}
	defer release()
	if err := r.Status().Patch(ctx, run, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	shared.WrittenOf(&r.Written).Note(run, base.ResourceVersion, r.Clock.Now())
	return nil
}

// report shows a target's outcome on the repository's status when it
// changes: failing, or delivering again.
func (r *Reconciler) report(ctx context.Context, repo *taugridv1.TauRepository, target string, rec taugridv1.NotificationRecord) error {
	failing := rec.State == taugridv1.NotifyGivenUp
	i := slices.IndexFunc(repo.Status.Notifications, func(n taugridv1.NotificationTargetStatus) bool { return n.Name == target })
	if i >= 0 && repo.Status.Notifications[i].Failing == failing && (!failing || repo.Status.Notifications[i].Message == rec.Message) {
		return nil
	}
	base := repo.DeepCopy()
	st := taugridv1.NotificationTargetStatus{Name: target, Failing: failing}
	if failing {
		st.Message, st.LastFailed = rec.Message, &rec.Time
	} else {
		st.LastDelivered = &rec.Time
	}
	if i < 0 {
		repo.Status.Notifications = append(repo.Status.Notifications, st)
	} else {
		repo.Status.Notifications[i] = st
	}
	return client.IgnoreNotFound(r.Status().Patch(ctx, repo, client.MergeFrom(base)))
}

func record(run *taugridv1.TauRun, key string) *taugridv1.NotificationRecord {
	for i := range run.Status.Notifications {
		if run.Status.Notifications[i].Key == key {
			return &run.Status.Notifications[i]
		}
	}
	return nil
}

// Backoff is how long after its tries-th failed try a notification is
// sent again: 10 s, doubling, at most 10 minutes.
func Backoff(tries int32) time.Duration {
	return min(10*time.Second<<max(tries-1, 0), 10*time.Minute)
}

// Due lists the notifications of run that should be sent by now, and
// when the next one falls due (zero: none is coming).
func Due(run *taugridv1.TauRun, targets []taugridv1.NotificationTarget, now time.Time) ([]due, time.Time) {
	var out []due
	var next time.Time
	later := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for _, t := range targets {
		for _, ev := range t.Events {
			for _, o := range occurrences(run, ev, t) {
				switch {
				case o.at.After(now):
					later(o.at)
				case now.Sub(o.at) <= Stale:
					out = append(out, due{target: t, event: ev, key: t.Name + "/" + string(ev) + o.suffix})
				}
			}
		}
	}
	return out, next
}

// occurrence is an event of a run: when it happened (or will, for a wait
// or an idle spell that has not lasted long enough yet).
type occurrence struct {
	at     time.Time
	suffix string // "/<attempt>" for an attempt's event
}

func occurrences(run *taugridv1.TauRun, ev taugridv1.NotificationEvent, t taugridv1.NotificationTarget) []occurrence {
	phase, since := run.Status.Phase, entered(run)
	switch ev {
	case taugridv1.NotifyEnded:
		if phase.Final() {
			return []occurrence{{at: since}}
		}
	case taugridv1.NotifyFailed:
		if phase == taugridv1.PhaseFailed {
			return []occurrence{{at: since}}
		}
	case taugridv1.NotifyWaiting:
		if phase == taugridv1.PhaseQueued && !since.IsZero() {
			return []occurrence{{at: since.Add(after(t.WaitingAfter))}}
		}
	case taugridv1.NotifyPreempted:
		var out []occurrence
		for _, a := range run.Status.Attempts {
			if a.Preemption != nil {
				at := a.StartTime
				if a.EndTime != nil {
					at = a.EndTime
				}
				if at != nil {
					out = append(out, occurrence{at: at.Time, suffix: fmt.Sprintf("/%d", a.Number)})
				}
			}
		}
		return out
	case taugridv1.NotifyIdle:
		if n := len(run.Status.Attempts); phase == taugridv1.PhaseRunning && n > 0 {
			a := run.Status.Attempts[n-1]
			if u := a.GPUUsage; u != nil && u.Idle && u.IdleSince != nil {
				return []occurrence{{at: u.IdleSince.Add(after(t.IdleAfter)), suffix: fmt.Sprintf("/%d", a.Number)}}
			}
		}
	}
	return nil
}

func after(d *metav1.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return DefaultAfter
	}
	return d.Duration
}

// entered is when the run entered its current phase.
func entered(run *taugridv1.TauRun) time.Time {
	for i := len(run.Status.Phases) - 1; i >= 0; i-- {
		if run.Status.Phases[i].Phase == run.Status.Phase {
			return run.Status.Phases[i].Time.Time
		}
	}
	return time.Time{}
}

// SetupWithManager registers the reconciler: every change of a TauRun may
// make a notification due.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("taurun-notify").
		For(&taugridv1.TauRun{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, DefaultWorkers)}).
		Complete(r)
}
