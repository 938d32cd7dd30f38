package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/clusters"
)

// workerRecheck is how often a worker's watch is looked at: its
// kubeconfig Secret may have changed (no Secret is watched), or its
// watch may have given up on an unreachable worker.
const workerRecheck = 30 * time.Second

// Workers decides TauGrid's admission check on each MultiKueue worker.
// MultiKueue hands a workload to the workers once the manager reserves
// quota for it, and each worker's Kueue admits on its own; the platform
// puts the check on the workers' ClusterQueues too, and Workers watches
// each worker that a MultiKueueCluster names, through the kubeconfig
// Secret Kueue itself uses, deciding the check there as Check does at
// home and keeping the worker's AdmissionCheck Active. A worker it
// cannot reach admits nothing through its checked queues: the check
// fails closed.
type Workers struct {
	// Manager reads the manager's MultiKueueClusters and runs (cached).
	Manager client.Reader
	// APIReader reads the manager's Jobs, RayJobs and the kubeconfig
	// Secrets, uncached.
	APIReader client.Reader
	// Namespace is Kueue's, where the kubeconfig Secrets are.
	Namespace string
	Scheme    *runtime.Scheme
	Clock     clock.PassiveClock

	mu      sync.Mutex
	ctx     context.Context
	watches map[string]*workerWatch
}

// workerWatch is the running watch of one worker, made from one version
// of its kubeconfig Secret.
type workerWatch struct {
	secretVersion string
	stop          context.CancelFunc
	// failed is closed when a part of the watch stopped on an error.
	failed chan struct{}
	once   sync.Once
}

func (w *workerWatch) fail() { w.once.Do(func() { close(w.failed) }) }

func (w *workerWatch) hasFailed() bool {
	select {
	case <-w.failed:
		return true
	default:
		return false
	}
}

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=multikueueclusters,verbs=get;list;watch

// Start holds the context the watches of the workers live in, and stops
// them all when it ends.
func (f *Workers) Start(ctx context.Context) error {
	f.mu.Lock()
	f.ctx = ctx
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, w := range f.watches {
		w.stop()
		delete(f.watches, name)
	}
	return nil
}

// NeedLeaderElection: only the leader decides checks.
func (f *Workers) NeedLeaderElection() bool { return true }

// Reconcile starts, restarts or stops the watch of one worker.
func (f *Workers) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	f.mu.Lock()
	running := f.ctx
	f.mu.Unlock()
	if running == nil {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	name := req.Name
	mkc := &kueue.MultiKueueCluster{}
	err := f.Manager.Get(ctx, req.NamespacedName, mkc)
	if apierrors.IsNotFound(err) || err == nil && !mkc.DeletionTimestamp.IsZero() {
		f.stop(name)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	s, err := clusters.KubeconfigSecret(ctx, f.APIReader, f.Namespace, mkc)
	switch {
	case errors.Is(err, clusters.ErrKubeconfigNotInSecret):
		f.stop(name)
		return reconcile.Result{}, nil
	case err != nil:
		// Kueue reports a missing Secret on the MultiKueueCluster; the
		// worker's checks wait.
		f.stop(name)
		return reconcile.Result{RequeueAfter: workerRecheck}, client.IgnoreNotFound(err)
	}
	f.mu.Lock()
	w := f.watches[name]
	f.mu.Unlock()
	if w != nil && w.secretVersion == s.ResourceVersion && !w.hasFailed() {
		return reconcile.Result{RequeueAfter: workerRecheck}, nil
	}
	f.stop(name)
	if err := f.watch(running, name, s); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "worker's admission checks are not watched", "worker", name)
	}
	return reconcile.Result{RequeueAfter: workerRecheck}, nil
}

// stop ends the watch of worker name, if any.
func (f *Workers) stop(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.watches[name]; w != nil {
		w.stop()
		delete(f.watches, name)
	}
}

// watch starts watching worker name with the kubeconfig in s: a cache of
// its Workloads and AdmissionChecks, a Check over its workloads and an
// Activator over its checks.
func (f *Workers) watch(parent context.Context, name string, s *corev1.Secret) error {
	cfg, err := clusters.RESTConfig(s.Data[clusters.KubeconfigKey])
	if err != nil {
		return fmt.Errorf("worker %s: kubeconfig Secret %s: %w", name, s.Name, err)
	}
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = f.Scheme
		o.Cache.DefaultTransform = cache.TransformStripManagedFields() // as the manager's own cache
	})
	if err != nil {
		return fmt.Errorf("worker %s: %w", name, err)
	}
	check := &Check{Client: cl.GetClient(), APIReader: cl.GetAPIReader(), Clock: f.Clock,
		Worker: name, Manager: f.Manager, ManagerAPIReader: f.APIReader}
	checks, err := controller.NewUnmanaged("admission-"+name, controller.Options{Reconciler: check, SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: Concurrency})
	if err != nil {
		return err
	}
	if err := checks.Watch(source.Kind(cl.GetCache(), &kueue.Workload{}, &handler.TypedEnqueueRequestForObject[*kueue.Workload]{},
		predicate.NewTypedPredicateFuncs(func(wl *kueue.Workload) bool { return anyPending(wl) }))); err != nil {
		return err
	}
	activator := &Activator{Client: cl.GetClient(), Clock: f.Clock}
	active, err := controller.NewUnmanaged("admissioncheck-"+name, controller.Options{Reconciler: activator, SkipNameValidation: ptr.To(true)})
	if err != nil {
		return err
	}
	if err := active.Watch(source.Kind(cl.GetCache(), &kueue.AdmissionCheck{}, &handler.TypedEnqueueRequestForObject[*kueue.AdmissionCheck]{})); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(parent)
	w := &workerWatch{secretVersion: s.ResourceVersion, stop: cancel, failed: make(chan struct{})}
	for _, run := range []func(context.Context) error{cl.Start, checks.Start, active.Start} {
		go func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				ctrl.LoggerFrom(parent).Error(err, "watching a worker's admission checks", "worker", name)
				w.fail()
				cancel()
			}
		}()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watches == nil {
		f.watches = map[string]*workerWatch{}
	}
	f.watches[name] = w
	return nil
}

// SetupWithManager watches the manager's MultiKueueClusters.
func (f *Workers) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(f); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("admission-workers").
		For(&kueue.MultiKueueCluster{}).
		Complete(f)
}
