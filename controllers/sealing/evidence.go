package sealing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

const (
	ReasonStoreUnavailable = "StoreUnavailable"
	// ReasonAttestationKeyUnusable: no bundle is sealed until the
	// attestation key's Secret holds a key that parses.
	ReasonAttestationKeyUnusable = "AttestationKeyUnusable"
)

// sealTimeout bounds collecting and storing one bundle, so a store that
// hangs holds an evidence worker no longer; the controller tries again.
const sealTimeout = 30 * time.Second

// Policies gives a platform's whole policy at a commit, parsed (its
// Topologies included), as the run reconciler rendered under it.
type Policies interface {
	PolicyAt(ctx context.Context, platform, commit string) (*render.Policy, error)
}

// EvidenceRecorder seals an evidence bundle for every attempt that ends:
// the run reconciler marks an ended attempt (EvidenceSealed=False,
// Sealing) and this controller, on workers of its own, seals it, and
// retries bundles a store failure left unsealed.
type EvidenceRecorder struct {
	Client client.Client
	// APIReader reads events and Secrets around the cache.
	APIReader client.Reader
	// Events, once synced, gives a local attempt's events instead of
	// APIReader (a dispatched attempt's are listed from both clusters);
	// nil: every seal lists them.
	Events *EventBook
	Logs   runs.LogSource // nil records no log tails
	// Clusters reads a dispatched attempt's pods, nodes, pod events and
	// logs from its MultiKueue worker; nil: every attempt is local.
	Clusters clusters.Locator
	Files    policy.TauFileReader
	Policies Policies
	// Sources says where an attempt's pods fetched the source; nil: none.
	Sources SourceLocator
	Store   evidence.Store
	// Attestations gives the key that signs each bundle's attestation; a
	// bundle is sealed only with one (nil seals nothing).
	Attestations evidence.KeySource
	Clock        clock.PassiveClock
	Recorder     events.EventRecorder
	Metrics      *EvidenceMetrics
	// Written records the run status writes of this process, shared with
	// the other controllers that write a run's status; nil: a record of
	// this controller's own writes only.
	Written *shared.Written

	parts policyParts
}

// SourceLocator says where an attempt's pods fetched the run's source
// archive, without building it.
type SourceLocator interface {
	SourceLocation(run *taugridv1.TauRun) *render.SourceArchive
}

// EvidenceMetrics count bundles and how long sealing took.
type EvidenceMetrics struct {
	Bundles *prometheus.CounterVec
	Seconds prometheus.Histogram
}

// NewEvidenceMetrics registers the evidence metrics.
func NewEvidenceMetrics(reg prometheus.Registerer) (*EvidenceMetrics, error) {
	m := &EvidenceMetrics{
		Bundles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taugrid_evidence_bundles_total",
			Help: "Evidence bundles by result: sealed, or failed (the store was full or unreachable; retried)."}, []string{"result"}),
		Seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "taugrid_evidence_seal_seconds",
			Help: "Time to collect and store one evidence bundle.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 8)}),
	}
	for _, c := range []prometheus.Collector{m.Bundles, m.Seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// seal seals the given attempts' bundles and records the outcome in the
// EvidenceSealed condition, an event and the metrics; it reports whether
// all were stored.
func (e *EvidenceRecorder) seal(ctx context.Context, run *taugridv1.TauRun, attempts []int) bool {
	for _, n := range attempts {
		start := e.Clock.Now()
		sctx, cancel := context.WithTimeout(ctx, sealTimeout)
		digest, err := e.sealAttempt(sctx, run, n)
		cancel()
		if digest != "" || err != nil {
			// Stored, or not storable now: either way the worker's Job is
			// let go (a retry while the store is down records what is
			// left). Sealed before, it was let go then.
			e.releaseOnWorker(ctx, run, n)
		}
		if e.Metrics != nil {
			e.Metrics.Seconds.Observe(e.Clock.Since(start).Seconds())
		}
		if err != nil {
			msg := fmt.Sprintf("evidence of attempt %d is not stored yet (retrying): %s", n, evidence.NewMasker().Mask(err.Error()))
			reason := ReasonStoreUnavailable
			if errors.As(err, new(attestationKeyError)) {
				reason = ReasonAttestationKeyUnusable
			}
			e.count("failed")
			e.SetCondition(run, metav1.ConditionFalse, reason, msg)
			e.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, "Seal", "%s", msg)
			return false
		}
		if digest == "" {
			continue // sealed before
		}
		msg := fmt.Sprintf("attempt %d sealed as %s", n, digest)
		e.count("sealed")
		// No Event: the condition says it, and the run's evidence page
		// lists every attempt's bundle; an Event was one more write a run.
		e.SetCondition(run, metav1.ConditionTrue, shared.ReasonEvidenceSealed, msg)
	}
	if needsEvidenceRetry(run) {
		// Everything was sealed before (a lost status write): say so.
		e.SetCondition(run, metav1.ConditionTrue, shared.ReasonEvidenceSealed, "every ended attempt is sealed")
	}
	return true
}

func (e *EvidenceRecorder) count(result string) {
	if e.Metrics != nil {
		e.Metrics.Bundles.WithLabelValues(result).Inc()
	}
}

func (e *EvidenceRecorder) SetCondition(run *taugridv1.TauRun, s metav1.ConditionStatus, reason, msg string) {
	shared.SetCondition(&run.Status.Conditions, run.Generation, e.Clock.Now(), shared.ConditionEvidence, s, reason, msg)
}

// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=get;list;watch
// Secrets in tenant namespaces are read through the platform's SecretsGrant.
// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=secrets,verbs=get

// Reconcile seals the bundles of a run whose EvidenceSealed condition is
// False, backing off through the rate limiter while the store fails.
func (e *EvidenceRecorder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	run := &taugridv1.TauRun{}
	if err := e.Client.Get(ctx, req.NamespacedName, run); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !needsEvidenceRetry(run) {
		return reconcile.Result{}, nil
	}
	if shared.WrittenOf(&e.Written).Lags(run, e.Clock.Now()) {
		// A copy this process's status write replaced: the seal's write
		// would be refused (409) after the whole seal, done again.
		return reconcile.Result{RequeueAfter: shared.CacheLag}, nil
	}
	base := run.DeepCopy()
	ok := e.seal(ctx, run, shared.EndedAttempts(run))
	if !equality.Semantic.DeepEqual(base.Status, run.Status) {
		// status.conditions is one list, shared with the run reconciler,
		// and a merge patch replaces it whole: written from a copy older
		// than the run reconciler's last write, it would put that copy's
		// conditions back. The lock refuses such a write (Conflict); the
		// retry reads the run again.
		if err := e.patchStatus(ctx, base, run); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if !ok {
		return reconcile.Result{}, fmt.Errorf("evidence of run %s: %s", req.NamespacedName, apimeta.FindStatusCondition(run.Status.Conditions, shared.ConditionEvidence).Message)
	}
	return reconcile.Result{}, nil
}

// patchStatus writes what the seal changed from base to run, holding the
// run (shared.Written.Guard).
func (e *EvidenceRecorder) patchStatus(ctx context.Context, base, run *taugridv1.TauRun) error {
	release, err := shared.WrittenOf(&e.Written).Guard(ctx, run, e.Clock.Now())
	if err != nil {
		return err
	}
	defer release()
	if err := e.Client.Status().Patch(ctx, run, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	shared.WrittenOf(&e.Written).Note(run, base.ResourceVersion, e.Clock.Now())
	return nil
}

func needsEvidenceRetry(run *taugridv1.TauRun) bool {
	c := apimeta.FindStatusCondition(run.Status.Conditions, shared.ConditionEvidence)
	return c != nil && c.Status == metav1.ConditionFalse
}

// SetupWithManager registers the evidence controller: it sees only runs
// whose evidence is not sealed.
func (e *EvidenceRecorder) SetupWithManager(mgr ctrl.Manager) error {
	pending := predicate.NewPredicateFuncs(func(o client.Object) bool {
		run, ok := o.(*taugridv1.TauRun)
		return ok && needsEvidenceRetry(run)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("evidence").
		For(&taugridv1.TauRun{}, builder.WithPredicates(pending, predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		WithOptions(controller.Options{MaxConcurrentReconciles: evidenceWorkers}).
		Complete(e)
}

// EvidenceRuns reads live runs for the evidence page.
type EvidenceRuns struct {
	Client client.Reader
}

// LiveRun returns the run and its repository's URL; nil when it is gone.
func (s *EvidenceRuns) LiveRun(ctx context.Context, namespace, name string) (*evidence.Live, error) {
	run := &taugridv1.TauRun{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, run); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, err
	}
	live := &evidence.Live{Run: run}
	repo := &taugridv1.TauRepository{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: run.Spec.Repository}, repo); err == nil {
		live.RepositoryURL = evidence.StripCredentials(repo.Spec.URL)
	}
	return live, nil
}

// PruneEvidence applies the retention to the store every interval until
// ctx ends; a manager runnable.
type PruneEvidence struct {
	Store     evidence.Store
	Retention evidence.Retention
	Interval  time.Duration
	Clock     clock.PassiveClock
}

// Start prunes now and then every interval.
func (p *PruneEvidence) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("evidence-retention")
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		if b, n, err := evidence.Prune(ctx, p.Store, p.Retention, p.Clock.Now()); err != nil {
			log.Error(err, "pruning evidence")
		} else if b > 0 {
			log.Info("pruned evidence", "bundles", b, "blobs", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
