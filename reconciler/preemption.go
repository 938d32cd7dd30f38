package reconciler

import (
	"context"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// evictedByPreemption reports whether Kueue evicted the workload to make
// room for another.
func evictedByPreemption(wl *kueue.Workload) bool {
	if wl == nil {
		return false
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == kueue.WorkloadEvictedByPreemption
}

// kueuePreemption picks the preemptor's job UID and Kueue's reason out of
// the Preempted condition's message, "Preempted to accommodate a workload
// (UID: …, JobUID: …) due to <reason>; preemptor path: …".
var kueuePreemption = regexp.MustCompile(`JobUID: ([^)]*)\) due to ([^;]*)`)

// preemptor names, in tenant terms, the run that preempted a workload:
// "preempted by run team-b/big-7f3k2 (prioritization in the ClusterQueue)".
// It returns "" when Kueue's message names no job, and names a job that is
// not a TauGrid run by its Workload.
func (r *RunReconciler) preemptor(ctx context.Context, wl *kueue.Workload) (string, error) {
	if wl == nil {
		return "", nil
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
	if c == nil {
		c = meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	}
	if c == nil {
		return "", nil
	}
	m := kueuePreemption.FindStringSubmatch(c.Message)
	if m == nil || m[1] == "" {
		return "", nil
	}
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.MatchingLabels{kueueJobUID: m[1]}); err != nil {
		return "", err
	}
	if len(wls.Items) == 0 {
		return fmt.Sprintf("preempted by another workload (%s)", m[2]), nil
	}
	w := &wls.Items[0]
	if run, ok := runOfWorkload(w); ok {
		return fmt.Sprintf("preempted by run %s/%s (%s)", w.Namespace, run, m[2]), nil
	}
	return fmt.Sprintf("preempted by workload %s/%s (%s)", w.Namespace, w.Name, m[2]), nil
}
