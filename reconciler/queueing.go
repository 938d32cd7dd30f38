package reconciler

import (
	"context"
	"fmt"
	"sort"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=localqueues;clusterqueues,verbs=get;list;watch

// maxAhead is how many workloads ahead of a run its explanation names.
const maxAhead = 3

// queueState reads a workload's queue from the cache: its ClusterQueue and
// its position among that queue's pending workloads. It makes no API calls
// beyond the informers' lists.
func (r *RunReconciler) queueState(ctx context.Context, wl *kueue.Workload) runs.QueueState {
	var q runs.QueueState
	lq := &kueue.LocalQueue{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, lq); err != nil {
		return q
	}
	cq := &kueue.ClusterQueue{}
	if err := r.Get(ctx, types.NamespacedName{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		return q
	}
	q.ClusterQueue = cq
	feeds, err := r.feeding(ctx, lq.Spec.ClusterQueue)
	if err != nil {
		return q
	}
	var pending []*kueue.Workload
	for ns, queues := range feeds {
		// Only the namespaces whose LocalQueues feed this ClusterQueue are
		// read: one tenant's share of the cluster's Workloads, not all of
		// them for every queued run (hack/scale, 10,000 runs: 22 MB listed
		// per pass of the queued runs).
		var wls kueue.WorkloadList
		if r.List(ctx, &wls, client.InNamespace(ns), client.UnsafeDisableDeepCopy) != nil {
			return runs.QueueState{ClusterQueue: cq}
		}
		for i := range wls.Items {
			w := &wls.Items[i]
			switch {
			case !queues[string(w.Spec.QueueName)]:
			case isPending(w):
				pending = append(pending, w)
			case meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadAdmitted) && !meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished):
				if end, ok := r.timeLimit(ctx, w); ok && (q.FreesBy.IsZero() || end.Before(q.FreesBy)) {
					q.FreesBy, q.FreedBy = end, describeWorkload(w)
				}
			}
		}
	}
	q.Position, q.Pending, q.Ahead = positionIn(pending, wl)
	return q
}

// feeding names the LocalQueues that feed a ClusterQueue, by namespace.
func (r *RunReconciler) feeding(ctx context.Context, cq kueue.ClusterQueueReference) (map[string]map[string]bool, error) {
	var lqs kueue.LocalQueueList
	if err := r.List(ctx, &lqs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	feeds := map[string]map[string]bool{}
	for _, l := range lqs.Items {
		if l.Spec.ClusterQueue != cq {
			continue
		}
		if feeds[l.Namespace] == nil {
			feeds[l.Namespace] = map[string]bool{}
		}
		feeds[l.Namespace][l.Name] = true
	}
	return feeds, nil
}

// isPending: waiting for quota, neither reserved nor finished.
func isPending(w *kueue.Workload) bool {
	return w.DeletionTimestamp.IsZero() && (w.Spec.Active == nil || *w.Spec.Active) &&
		!meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadQuotaReserved) &&
		!meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
}

// positionIn orders pending workloads as Kueue's BestEffortFIFO and
// StrictFIFO queues do (higher priority first, then older) and returns
// wl's 1-based place, the number pending, and who is just ahead.
func positionIn(pending []*kueue.Workload, wl *kueue.Workload) (int, int, []string) {
	sort.SliceStable(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if pa, pb := priority(a), priority(b); pa != pb {
			return pa > pb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for i, w := range pending {
		if w.UID == wl.UID && w.Namespace == wl.Namespace && w.Name == wl.Name {
			var ahead []string
			for j := max(0, i-maxAhead); j < i; j++ {
				ahead = append(ahead, describeWorkload(pending[j]))
			}
			return i + 1, len(pending), ahead
		}
	}
	return 0, len(pending), nil
}

func priority(w *kueue.Workload) int32 {
	if w.Spec.Priority != nil {
		return *w.Spec.Priority
	}
	return 0
}

// describeWorkload names a workload as a researcher knows it: the run, and
// its priority.
func describeWorkload(w *kueue.Workload) string {
	name := w.Name
	if run, ok := runOfWorkload(w); ok {
		name = "run " + run
	}
	return fmt.Sprintf("%s/%s (priority %d)", w.Namespace, name, priority(w))
}

// since is when the run last entered phase.
func since(run *taugridv1.TauRun, phase taugridv1.RunPhase) time.Time {
	for i := len(run.Status.Phases) - 1; i >= 0; i-- {
		if run.Status.Phases[i].Phase == phase {
			return run.Status.Phases[i].Time.Time
		}
	}
	return time.Time{}
}

// checkFeasible refuses a run its ClusterQueue can never admit: a resource
// no flavor of the queue covers, or more than the queue could ever hold
// (nominal quota plus its borrowing limit). Queues that may borrow without
// a limit are given the benefit of the doubt. The error points at the tau
// file's field.
func checkFeasible(ctx context.Context, r client.Reader, ns string, plan *render.Plan, objs []client.Object) error {
	lq := &kueue.LocalQueue{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: plan.Queue}, lq); err != nil {
		return client.IgnoreNotFound(err) // Kueue says so in the Workload's status
	}
	cq := &kueue.ClusterQueue{}
	if err := r.Get(ctx, types.NamespacedName{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		return client.IgnoreNotFound(err)
	}
	fields := map[corev1.ResourceName]string{corev1.ResourceCPU: "compute.cpu", corev1.ResourceMemory: "compute.memory", plan.Profile.GPUResource: "compute.gpus"}
	if plan.Engine == render.EngineRayJob {
		fields[plan.Profile.GPUResource] = "compute.gpus_per_worker"
	}
	if plan.MIG != "" {
		fields[corev1.ResourceName(render.MIGResource(plan.MIG))] = "compute.mig"
	}
	total := requests(objs)
	for _, name := range sortedResources(total) {
		want := total[name]
		capacity, covered, bounded := queueCapacity(cq, name)
		field := fields[name]
		if field == "" {
			field = "compute"
		}
		switch {
		case !covered:
			return plan.Config.ErrorAt(field, "ClusterQueue %s (queue %s) offers no %s: this run could never be admitted; pick a profile that has it", cq.Name, plan.Queue, name)
		case bounded && want.Cmp(capacity) > 0:
			return plan.Config.ErrorAt(field, "the run asks %s %s in all, more than ClusterQueue %s can ever hold (%s, nominal quota plus borrowing limit): it could never be admitted",
				want.String(), name, cq.Name, capacity.String())
		}
	}
	return checkPlacement(ctx, r, plan)
}

// queueCapacity is the most of a resource one flavor of the queue could
// give a workload.
func queueCapacity(cq *kueue.ClusterQueue, name corev1.ResourceName) (best resource.Quantity, covered, bounded bool) {
	bounded = true
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.Name != name {
					continue
				}
				covered = true
				c := r.NominalQuota.DeepCopy()
				switch {
				case r.BorrowingLimit != nil:
					c.Add(*r.BorrowingLimit)
				case cq.Spec.CohortName != "":
					bounded = false // may borrow whatever the cohort lends
				}
				if c.Cmp(best) > 0 {
					best = c
				}
			}
		}
	}
	return best, covered, bounded
}

// requests sums what the rendered workload asks of the queue: every pod's
// requests, times its count.
func requests(objs []client.Object) corev1.ResourceList {
	total := corev1.ResourceList{}
	add := func(spec *corev1.PodSpec, n int32) {
		for _, c := range spec.Containers {
			for name, q := range c.Resources.Requests {
				q = q.DeepCopy()
				for range n {
					cur := total[name]
					cur.Add(q)
					total[name] = cur
				}
			}
		}
	}
	for _, o := range objs {
		switch w := o.(type) {
		case *batchv1.Job:
			n := int32(1)
			if w.Spec.Parallelism != nil {
				n = *w.Spec.Parallelism
			}
			add(&w.Spec.Template.Spec, n)
		case *rayv1.RayJob:
			if rc := w.Spec.RayClusterSpec; rc != nil {
				add(&rc.HeadGroupSpec.Template.Spec, 1)
				for _, g := range rc.WorkerGroupSpecs {
					n := int32(1)
					if g.Replicas != nil {
						n = *g.Replicas
					}
					add(&g.Template.Spec, n)
				}
			}
		}
	}
	return total
}

func sortedResources(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// preemptions counts the run's attempts that ended preempted.
func preemptions(run *taugridv1.TauRun) int {
	n := 0
	for _, a := range run.Status.Attempts {
		if a.FailureClass == string(FailurePreempted) {
			n++
		}
	}
	return n
}

// queueDeadlines ends a waiting run that can never be admitted, or that
// waited longer than its max_queue_time, releasing its place in the queue;
// done reports that it did. Otherwise it says when to look again.
func (r *RunReconciler) queueDeadlines(ctx context.Context, run *taugridv1.TauRun, ex runs.Explanation) (done bool, after time.Duration, err error) {
	msg := ""
	if ex.Kind == runs.WaitInfeasible {
		msg = ex.Short
	} else {
		plan, err := r.plan(ctx, run, len(run.Status.Attempts))
		if err != nil || plan.MaxQueueTime <= 0 {
			return false, 0, nil //nolint:nilerr // a plan error shows at the next submission, not here
		}
		start := since(run, taugridv1.PhaseQueued)
		if run.Status.Phase != taugridv1.PhaseQueued || start.IsZero() {
			return false, plan.MaxQueueTime, nil
		}
		waited := r.Clock.Now().Sub(start)
		if waited < plan.MaxQueueTime {
			return false, plan.MaxQueueTime - waited, nil
		}
		msg = fmt.Sprintf("waited %s in the queue, the limit (limits.max_queue_time) is %s: %s", waited.Round(time.Second), plan.MaxQueueTime, ex.Short)
	}
	if err := r.deleteWorkload(ctx, run); err != nil {
		return false, 0, err
	}
	if n := len(run.Status.Attempts); n > 0 {
		a := &run.Status.Attempts[n-1]
		now := metav1.NewTime(r.Clock.Now())
		a.EndTime, a.Reason = &now, msg
	}
	run.Status.Workload.Reason = ex.Long
	r.fail(run, ReasonFailed, msg)
	return true, 0, nil
}

// startDeadline reports an admitted attempt whose pods are still not
// running after the platform's start deadline, or when to look again.
func (r *RunReconciler) startDeadline(ctx context.Context, run *taugridv1.TauRun) (late bool, after time.Duration, err error) {
	plan, err := r.plan(ctx, run, len(run.Status.Attempts))
	if err != nil || plan.StartDeadline <= 0 {
		return false, 0, nil //nolint:nilerr // a plan error shows at the next submission
	}
	start := since(run, taugridv1.PhaseAdmitted)
	if run.Status.Phase != taugridv1.PhaseAdmitted || start.IsZero() {
		return false, plan.StartDeadline, nil
	}
	waited := r.Clock.Now().Sub(start)
	if waited < plan.StartDeadline {
		return false, plan.StartDeadline - waited, nil
	}
	return true, 0, nil
}

// jobEndedInFailure reports a workload that ended in failure by itself.
func jobEndedInFailure(o Observed) bool {
	p, done := finished(o)
	return done && p.Phase == taugridv1.PhaseFailed
}

// timeLimit is when an admitted workload's Job or RayJob must end: its
// start plus its activeDeadlineSeconds, read from the cache.
func (r *RunReconciler) timeLimit(ctx context.Context, w *kueue.Workload) (time.Time, bool) {
	owner := metav1.GetControllerOf(w)
	if owner == nil {
		return time.Time{}, false
	}
	key := types.NamespacedName{Namespace: w.Namespace, Name: owner.Name}
	switch owner.Kind {
	case "Job":
		j := &batchv1.Job{}
		if r.Get(ctx, key, j, client.UnsafeDisableDeepCopy) != nil || j.Status.StartTime == nil || j.Spec.ActiveDeadlineSeconds == nil {
			return time.Time{}, false
		}
		return j.Status.StartTime.Add(time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second), true
	case "RayJob":
		j := &rayv1.RayJob{}
		if r.Get(ctx, key, j, client.UnsafeDisableDeepCopy) != nil || j.Status.StartTime == nil || j.Spec.ActiveDeadlineSeconds == nil {
			return time.Time{}, false
		}
		return j.Status.StartTime.Add(time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second), true
	}
	return time.Time{}, false
}
