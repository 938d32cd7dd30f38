package builders

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// WorkloadBuilder builds a Kueue Workload.
type WorkloadBuilder struct{ wl kueue.Workload }

// MakeWorkload starts a Workload of queue "runs".
func MakeWorkload(name, namespace string) *WorkloadBuilder {
	return &WorkloadBuilder{wl: kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: kueue.WorkloadSpec{QueueName: "runs"}}}
}

// Queue sets the LocalQueue.
func (b *WorkloadBuilder) Queue(q string) *WorkloadBuilder {
	b.wl.Spec.QueueName = kueue.LocalQueueName(q)
	return b
}

// UID sets the UID.
func (b *WorkloadBuilder) UID(uid string) *WorkloadBuilder {
	b.wl.UID = types.UID(uid)
	return b
}

// Priority sets spec.priority.
func (b *WorkloadBuilder) Priority(p int32) *WorkloadBuilder {
	b.wl.Spec.Priority = &p
	return b
}

// Created sets the creation time.
func (b *WorkloadBuilder) Created(t metav1.Time) *WorkloadBuilder {
	b.wl.CreationTimestamp = t
	return b
}

// QuotaReserved sets the QuotaReserved condition as Kueue v0.17 writes it
// (reason Pending while it waits, with the scheduler's message).
func (b *WorkloadBuilder) QuotaReserved(status metav1.ConditionStatus, msg string) *WorkloadBuilder {
	b.wl.Status.Conditions = append(b.wl.Status.Conditions,
		metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: status, Reason: "Pending", Message: msg})
	return b
}

// Condition adds a condition.
func (b *WorkloadBuilder) Condition(c metav1.Condition) *WorkloadBuilder {
	b.wl.Status.Conditions = append(b.wl.Status.Conditions, c)
	return b
}

// Obj is the Workload built.
func (b *WorkloadBuilder) Obj() *kueue.Workload { return b.wl.DeepCopy() }

// ClusterQueueBuilder builds a Kueue ClusterQueue of one resource group.
type ClusterQueueBuilder struct{ cq kueue.ClusterQueue }

// MakeClusterQueue starts a ClusterQueue.
func MakeClusterQueue(name string) *ClusterQueueBuilder {
	return &ClusterQueueBuilder{cq: kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Cohort sets the cohort.
func (b *ClusterQueueBuilder) Cohort(c string) *ClusterQueueBuilder {
	b.cq.Spec.CohortName = kueue.CohortReference(c)
	return b
}

// Quota adds a nominal quota of res in flavor; borrowingLimit "" leaves
// borrowing unlimited (in a cohort).
func (b *ClusterQueueBuilder) Quota(flavor string, res corev1.ResourceName, nominal, borrowingLimit string) *ClusterQueueBuilder {
	if len(b.cq.Spec.ResourceGroups) == 0 {
		b.cq.Spec.ResourceGroups = []kueue.ResourceGroup{{}}
	}
	rg := &b.cq.Spec.ResourceGroups[0]
	rq := kueue.ResourceQuota{Name: res, NominalQuota: resource.MustParse(nominal)}
	if borrowingLimit != "" {
		q := resource.MustParse(borrowingLimit)
		rq.BorrowingLimit = &q
	}
	if !slices.Contains(rg.CoveredResources, res) {
		rg.CoveredResources = append(rg.CoveredResources, res)
	}
	for i := range rg.Flavors {
		if rg.Flavors[i].Name == kueue.ResourceFlavorReference(flavor) {
			rg.Flavors[i].Resources = append(rg.Flavors[i].Resources, rq)
			return b
		}
	}
	rg.Flavors = append(rg.Flavors, kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(flavor), Resources: []kueue.ResourceQuota{rq}})
	return b
}

// Reserved records, in status, what the admitted workloads reserve of res
// in flavor and how much of it is borrowed.
func (b *ClusterQueueBuilder) Reserved(flavor string, res corev1.ResourceName, total, borrowed string) *ClusterQueueBuilder {
	b.cq.Status.FlavorsReservation = append(b.cq.Status.FlavorsReservation, kueue.FlavorUsage{Name: kueue.ResourceFlavorReference(flavor),
		Resources: []kueue.ResourceUsage{{Name: res, Total: resource.MustParse(total), Borrowed: resource.MustParse(borrowed)}}})
	return b
}

// Obj is the ClusterQueue built.
func (b *ClusterQueueBuilder) Obj() *kueue.ClusterQueue { return b.cq.DeepCopy() }
