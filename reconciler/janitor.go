package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;list;watch;delete

// JanitorMode says what the janitor does with what it finds.
type JanitorMode string

// The janitor's modes.
const (
	JanitorRelease JanitorMode = "release" // report, then free the quota
	JanitorReport  JanitorMode = "report"  // report only (event, metric, log)
)

// Finding reasons, as events and the metric's label name them.
const (
	ReasonOrphanedReservation = "OrphanedReservation" // a Workload holding quota for a job that is gone
	ReasonIdleReservation     = "IdleReservation"     // a TauGrid job admitted long ago with no pod running, and no run following it
	ReasonValidationFailed    = "ValidationFailed"    // a RayJob KubeRay refused, still holding quota
	ReasonStuckTerminating    = "StuckTerminating"    // a pod on a lost node that never finishes terminating
)

// Janitor finds quota held for nothing, which costs GPUs while running
// nothing (a reported RayJob held 18 GPUs for weeks after failing
// validation), and reports and releases it. It looks at what TauGrid made
// and at Kueue Workloads whose job is gone; runs that a TauRun follows are
// the run reconciler's (its start and queue deadlines).
type Janitor struct {
	Client   client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	Log      logr.Logger
	Mode     JanitorMode
	// IdleAfter is how long an admitted workload may run no pod, and a
	// pod on a lost node may stay terminating, before it is a finding.
	IdleAfter time.Duration
	// Every is the sweep interval (Start).
	Every   time.Duration
	Metrics *prometheus.CounterVec // finding reason, action; optional
}

// Finding is one thing the janitor found.
type Finding struct {
	Reason  string
	Object  string // kind/namespace/name
	Message string
}

// NewJanitorMetrics registers taugrid_janitor_findings_total.
func NewJanitorMetrics(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taugrid_janitor_findings_total",
		Help: "Quota held for nothing that the janitor found, by reason and what it did (released or reported)."}, []string{"reason", "action"})
	return c, reg.Register(c)
}

// Start sweeps every interval until ctx ends; on the leader only.
func (j *Janitor) Start(ctx context.Context) error {
	t := time.NewTicker(j.Every)
	defer t.Stop()
	for {
		if _, err := j.Sweep(ctx); err != nil {
			j.Log.Error(err, "janitor sweep")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: one janitor per cluster.
func (j *Janitor) NeedLeaderElection() bool { return true }

// Sweep looks once and acts on what it finds.
func (j *Janitor) Sweep(ctx context.Context) ([]Finding, error) {
	var found []Finding
	var wls kueue.WorkloadList
	if err := j.Client.List(ctx, &wls); err != nil {
		return nil, err
	}
	now := j.Clock.Now()
	for i := range wls.Items {
		wl := &wls.Items[i]
		reserved := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		if reserved == nil || reserved.Status != metav1.ConditionTrue || meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) || !wl.DeletionTimestamp.IsZero() {
			continue
		}
		f, err := j.checkWorkload(ctx, wl, now.Sub(reserved.LastTransitionTime.Time))
		if err != nil {
			return found, err
		}
		if f != nil {
			found = append(found, *f)
		}
	}
	pods, err := j.stuckPods(ctx, now)
	if err != nil {
		return found, err
	}
	return append(found, pods...), nil
}

// checkWorkload decides whether a Workload's reservation is held for
// nothing, and acts.
func (j *Janitor) checkWorkload(ctx context.Context, wl *kueue.Workload, held time.Duration) (*Finding, error) {
	owner := metav1.GetControllerOf(wl)
	if owner == nil {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}
	var job client.Object
	switch owner.Kind {
	case "Job":
		job = &batchv1.Job{}
	case "RayJob":
		job = &rayv1.RayJob{}
	default:
		return nil, nil
	}
	switch err := j.Client.Get(ctx, key, job); {
	case apierrors.IsNotFound(err):
		f := Finding{Reason: ReasonOrphanedReservation, Object: "Workload/" + wl.Namespace + "/" + wl.Name,
			Message: fmt.Sprintf("holds quota in queue %s for %s %s, which no longer exists", wl.Spec.QueueName, owner.Kind, owner.Name)}
		return &f, j.act(ctx, f, wl, nil)
	case err != nil:
		return nil, err
	case job.GetLabels()[render.LabelManagedBy] != render.ManagedBy:
		return nil, nil // not TauGrid's: only orphans are ours to judge
	}
	if rj, ok := job.(*rayv1.RayJob); ok && rj.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusValidationFailed {
		f := Finding{Reason: ReasonValidationFailed, Object: "RayJob/" + rj.Namespace + "/" + rj.Name,
			Message: fmt.Sprintf("KubeRay refused it (%s) but it still holds quota in queue %s", firstLine(rj.Status.Message), wl.Spec.QueueName)}
		return &f, j.act(ctx, f, job, wl)
	}
	if held < j.IdleAfter || !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) || j.followed(ctx, job) {
		return nil, nil
	}
	running, err := j.anyPodRunning(ctx, job)
	if err != nil || running {
		return nil, err
	}
	f := Finding{Reason: ReasonIdleReservation, Object: owner.Kind + "/" + wl.Namespace + "/" + owner.Name,
		Message: fmt.Sprintf("admitted %s ago in queue %s with no pod running and no run following it", held.Round(time.Second), wl.Spec.QueueName)}
	return &f, j.act(ctx, f, job, wl)
}

// followed reports a job that a live TauRun follows: the run reconciler's
// deadlines govern it.
func (j *Janitor) followed(ctx context.Context, job client.Object) bool {
	owner := metav1.GetControllerOf(job)
	if owner == nil || owner.Kind != "TauRun" {
		return false
	}
	run := &taugridv1.TauRun{}
	err := j.Client.Get(ctx, types.NamespacedName{Namespace: job.GetNamespace(), Name: owner.Name}, run)
	return err == nil && run.UID == owner.UID && !run.Status.Phase.Final()
}

func (j *Janitor) anyPodRunning(ctx context.Context, job client.Object) (bool, error) {
	var pods corev1.PodList
	if err := j.Client.List(ctx, &pods, client.InNamespace(job.GetNamespace()), client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}); err != nil {
		return false, err
	}
	for _, p := range pods.Items {
		for _, ref := range p.OwnerReferences {
			if ref.UID == job.GetUID() || ref.Name == job.GetName() {
				if p.Status.Phase == corev1.PodRunning {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// stuckPods finds TauGrid's pods that have been terminating for longer
// than their grace period plus IdleAfter on a node that is gone or not
// ready: no kubelet will ever confirm them, and their job cannot finish.
func (j *Janitor) stuckPods(ctx context.Context, now time.Time) ([]Finding, error) {
	var pods corev1.PodList
	if err := j.Client.List(ctx, &pods, client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}); err != nil {
		return nil, err
	}
	var found []Finding
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp.IsZero() || p.Spec.NodeName == "" || now.Sub(p.DeletionTimestamp.Time) < j.IdleAfter {
			continue
		}
		node := &corev1.Node{}
		err := j.Client.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, node)
		switch {
		case err == nil && nodeReady(node):
			continue
		case err != nil && !apierrors.IsNotFound(err):
			return found, err
		}
		f := Finding{Reason: ReasonStuckTerminating, Object: "Pod/" + p.Namespace + "/" + p.Name,
			Message: fmt.Sprintf("terminating for %s on node %s, which is gone or not ready", now.Sub(p.DeletionTimestamp.Time).Round(time.Second), p.Spec.NodeName)}
		if err := j.act(ctx, f, p, nil, client.GracePeriodSeconds(0)); err != nil {
			return found, err
		}
		found = append(found, f)
	}
	return found, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// act reports a finding (an event on the object, the metric, the log) and,
// in release mode, deletes what holds the quota: the object, and its Kueue
// Workload at once rather than when the garbage collector gets to it.
func (j *Janitor) act(ctx context.Context, f Finding, del client.Object, wl *kueue.Workload, opts ...client.DeleteOption) error {
	action := "reported"
	if j.Mode == JanitorRelease {
		action = "released"
		opts = append(opts, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err := j.Client.Delete(ctx, del, opts...); client.IgnoreNotFound(err) != nil {
			return err
		}
		if wl != nil {
			if err := j.Client.Delete(ctx, wl); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	if j.Metrics != nil {
		j.Metrics.WithLabelValues(f.Reason, action).Inc()
	}
	if j.Recorder != nil {
		j.Recorder.Eventf(del, nil, corev1.EventTypeWarning, f.Reason, "Janitor", "%s: %s", action, f.Message)
	}
	j.Log.Info("janitor finding", "reason", f.Reason, "object", f.Object, "action", action, "message", f.Message)
	return nil
}
