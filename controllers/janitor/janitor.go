package janitor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
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

	"github.com/taugrid/taugrid/controllers/shared"
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
	ReasonEndedRunPod         = "EndedRunPod"         // a pod of an ended attempt that still holds accelerators
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
	// EndedAfter is how long after an attempt ended its pods may still hold
	// accelerators before they are a finding: the run reconciler deletes
	// them at once, so one still there missed that. 0: a minute.
	EndedAfter time.Duration
	// Every is the sweep interval (Start).
	Every   time.Duration
	Metrics *prometheus.CounterVec // finding reason, action; optional
	// Clusters reads the pods of a Workload MultiKueue dispatched to a
	// worker (they run there, not here); nil: every Workload is local.
	Clusters clusters.Locator
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
	// The cache's own copies: the janitor only reads and deletes what it
	// lists (a copy of every Workload each minute was 41 MB of garbage at
	// 10,000 runs, hack/scale).
	if err := j.Client.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
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
	found = append(found, pods...)
	held, err := j.endedRunPods(ctx, now)
	found = append(found, held...)
	if err != nil {
		return found, err
	}
	holds, err := j.staleHolds(ctx)
	return append(found, holds...), err
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
	err := j.Client.Get(ctx, key, job)
	// A job of the same name with another UID replaced the owner (the run
	// reconciler deletes and recreates an unrecorded one): the Workload's
	// own job is gone all the same.
	replaced := err == nil && owner.UID != "" && job.GetUID() != owner.UID
	switch {
	case apierrors.IsNotFound(err) || replaced:
		if ours, err := j.taugrids(ctx, wl, owner.Name); err != nil || !ours {
			return nil, err // another controller's orphan is its own to judge
		}
		gone := "which no longer exists"
		if replaced {
			gone = "which was deleted and replaced by another of that name"
		}
		f := Finding{Reason: ReasonOrphanedReservation, Object: "Workload/" + wl.Namespace + "/" + wl.Name,
			Message: fmt.Sprintf("holds quota in queue %s for %s %s, %s", wl.Spec.QueueName, owner.Kind, owner.Name, gone)}
		return &f, j.act(ctx, f, wl, nil)
	case err != nil:
		return nil, err
	case job.GetLabels()[render.LabelManagedBy] != render.ManagedBy:
		return nil, nil // not TauGrid's: only orphans are ours to judge
	}
	if rj, ok := job.(*rayv1.RayJob); ok && rj.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusValidationFailed {
		f := Finding{Reason: ReasonValidationFailed, Object: "RayJob/" + rj.Namespace + "/" + rj.Name,
			Message: fmt.Sprintf("KubeRay refused it (%s) but it still holds quota in queue %s", shared.FirstLine(rj.Status.Message), wl.Spec.QueueName)}
		return &f, j.act(ctx, f, job, wl)
	}
	if held < j.IdleAfter || !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) || j.followed(ctx, job) {
		return nil, nil
	}
	running, err := j.anyPodRunning(ctx, job, wl)
	if err != nil || running {
		return nil, err
	}
	f := Finding{Reason: ReasonIdleReservation, Object: owner.Kind + "/" + wl.Namespace + "/" + owner.Name,
		Message: fmt.Sprintf("admitted %s ago in queue %s with no pod running and no run following it", held.Round(time.Second), wl.Spec.QueueName)}
	return &f, j.act(ctx, f, job, wl)
}

// taugrids reports a Workload of TauGrid's: labelled as TauGrid's (a
// Kueue configured to copy TauGrid's labels copies them), or owned by a
// job that a TauRun in its namespace records as one of its attempts'.
// Only these may the janitor judge once their job is gone: nothing else
// says whose a Workload was.
func (j *Janitor) taugrids(ctx context.Context, wl *kueue.Workload, job string) (bool, error) {
	if wl.Labels[render.LabelManagedBy] == render.ManagedBy {
		return true, nil
	}
	name, ok := render.RunOfWorkload(job)
	if !ok {
		return false, nil
	}
	run := &taugridv1.TauRun{}
	switch err := j.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: name}, run); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	for _, a := range run.Status.Attempts {
		if a.Workload == job {
			return true, nil
		}
	}
	return false, nil
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

// anyPodRunning reports a pod of job running where its Workload runs: on
// this cluster, or on the worker MultiKueue dispatched it to (where the
// worker's copy of the job, of the same name, owns the pods). A worker
// that cannot be read counts as running: the janitor releases only what
// it has seen idle.
func (j *Janitor) anyPodRunning(ctx context.Context, job client.Object, wl *kueue.Workload) (bool, error) {
	pods, err := j.podsOf(ctx, job, wl)
	if err != nil {
		j.Log.Info("cannot tell whether the dispatched job runs; leaving it", "job", job.GetNamespace()+"/"+job.GetName(), "error", err.Error())
		return true, nil
	}
	for _, p := range pods {
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

// podsOf lists TauGrid's pods in job's namespace of the cluster wl runs on.
func (j *Janitor) podsOf(ctx context.Context, job client.Object, wl *kueue.Workload) ([]corev1.Pod, error) {
	var r client.Reader = j.Client
	if wl.Status.ClusterName != nil && j.Clusters != nil {
		p, err := j.Clusters.PodsOf(ctx, *wl.Status.ClusterName)
		if err != nil {
			return nil, err
		}
		r = p.Reader
	}
	var pods corev1.PodList
	err := r.List(ctx, &pods, client.InNamespace(job.GetNamespace()), client.MatchingLabels{render.LabelManagedBy: render.ManagedBy})
	return pods.Items, err
}

// stuckPods finds TauGrid's pods that have been terminating for longer
// than their grace period plus IdleAfter on a node that is gone or not
// ready: no kubelet will ever confirm them, and their job cannot finish.
func (j *Janitor) stuckPods(ctx context.Context, now time.Time) ([]Finding, error) {
	var pods corev1.PodList // the cache's own copies, only read and deleted
	if err := j.Client.List(ctx, &pods, client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}, client.UnsafeDisableDeepCopy); err != nil {
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

// endedRunPods finds TauGrid's pods that still hold accelerators for an
// attempt that ended EndedAfter ago or more, or for a run that is gone,
// and releases them with their Ray cluster (which would recreate them).
func (j *Janitor) endedRunPods(ctx context.Context, now time.Time) ([]Finding, error) {
	var pods corev1.PodList // the cache's own copies, only read and deleted
	if err := j.Client.List(ctx, &pods, client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	after := j.EndedAfter
	if after == 0 {
		after = time.Minute
	}
	runs := map[types.NamespacedName]*taugridv1.TauRun{} // nil: gone
	var found []Finding
	for i := range pods.Items {
		p := &pods.Items[i]
		if !holdsAccelerators(p) || p.Labels[render.LabelRun] == "" {
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Labels[render.LabelRun]}
		run, seen := runs[key]
		if !seen {
			run = &taugridv1.TauRun{}
			switch err := j.Client.Get(ctx, key, run); {
			case apierrors.IsNotFound(err):
				run = nil
			case err != nil:
				return found, err
			}
			runs[key] = run
		}
		ended, ok := attemptEnded(run, p.Labels[render.LabelAttempt])
		if !ok || now.Sub(ended) < after {
			continue
		}
		f := Finding{Reason: ReasonEndedRunPod, Object: "Pod/" + p.Namespace + "/" + p.Name,
			Message: fmt.Sprintf("holds %s for attempt %s of run %s, which ended %s ago", Accelerators(p), p.Labels[render.LabelAttempt], key.Name, now.Sub(ended).Round(time.Second))}
		switch {
		case run == nil:
			f.Message = fmt.Sprintf("holds %s for run %s, which no longer exists", Accelerators(p), key.Name)
		case ended.IsZero(): // no end recorded: a later attempt replaced it
			f.Message = fmt.Sprintf("holds %s for attempt %s of run %s, which a later attempt replaced", Accelerators(p), p.Labels[render.LabelAttempt], key.Name)
		}
		if err := j.releaseOwner(ctx, p); err != nil {
			return found, err
		}
		if err := j.act(ctx, f, p, nil); err != nil {
			return found, err
		}
		found = append(found, f)
	}
	return found, nil
}

// attemptEnded says when a run's attempt ended: its recorded end, the
// run's end for its last attempt, or, for a run that is gone, now (the
// zero time). ok is false while the attempt goes on.
func attemptEnded(run *taugridv1.TauRun, attempt string) (time.Time, bool) {
	if run == nil {
		return time.Time{}, true
	}
	n, err := strconv.Atoi(attempt)
	if err != nil {
		return time.Time{}, false
	}
	for i, a := range run.Status.Attempts {
		switch {
		case a.Number != n:
		case a.EndTime != nil:
			return a.EndTime.Time, true
		case i < len(run.Status.Attempts)-1: // a later attempt began
			return time.Time{}, true
		case run.Status.Phase.Final():
			return shared.Since(run, run.Status.Phase), true
		}
	}
	return time.Time{}, false
}

// releaseOwner deletes, in release mode, the Ray cluster a pod belongs to:
// KubeRay would recreate a head or worker pod deleted alone.
func (j *Janitor) releaseOwner(ctx context.Context, p *corev1.Pod) error {
	owner := metav1.GetControllerOf(p)
	if j.Mode != JanitorRelease || owner == nil || owner.Kind != "RayCluster" {
		return nil
	}
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: owner.Name}}
	return client.IgnoreNotFound(j.Client.Delete(ctx, rc, client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

// holdsAccelerators reports a pod that has not terminated, nor begun to,
// and asks for a device (shared.IsAccelerator).
func holdsAccelerators(p *corev1.Pod) bool {
	return !shared.PodTerminated(p) && p.DeletionTimestamp.IsZero() && Accelerators(p) != ""
}

// Accelerators names the devices a pod's containers ask for, "" if none.
func Accelerators(p *corev1.Pod) string {
	var names []string
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name, q := range l {
				if shared.IsAccelerator(name) && !q.IsZero() && !slices.Contains(names, string(name)) {
					names = append(names, string(name))
				}
			}
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
