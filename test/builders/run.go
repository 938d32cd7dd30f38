package builders

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// UID sets the run's UID.
func (b *TauRunBuilder) UID(uid string) *TauRunBuilder {
	b.run.UID = types.UID(uid)
	return b
}

// Generation sets the run's generation.
func (b *TauRunBuilder) Generation(g int64) *TauRunBuilder {
	b.run.Generation = g
	return b
}

// Repository names the run's TauRepository.
func (b *TauRunBuilder) Repository(name string) *TauRunBuilder {
	b.run.Spec.Repository = name
	return b
}

// Cancel asks for the run's cancellation.
func (b *TauRunBuilder) Cancel() *TauRunBuilder {
	b.run.Spec.Cancel = true
	return b
}

// Phase sets the run's phase and message.
func (b *TauRunBuilder) Phase(p taugridv1.RunPhase, msg string) *TauRunBuilder {
	b.run.Status.Phase, b.run.Status.Message = p, msg
	return b
}

// Workload records the attempt's workload (kind Job or RayJob) in queue.
func (b *TauRunBuilder) Workload(kind, name, queue string) *TauRunBuilder {
	b.run.Status.Workload = &taugridv1.WorkloadStatus{Kind: kind, Name: name, Queue: queue}
	return b
}

// Attempt appends an attempt of workload, started at start; a non-zero
// end ends it, with class.
func (b *TauRunBuilder) Attempt(workload string, start, end time.Time, class taugridv1.FailureClass) *TauRunBuilder {
	a := taugridv1.Attempt{Number: len(b.run.Status.Attempts) + 1, Workload: workload}
	if !start.IsZero() {
		a.StartTime = &metav1.Time{Time: start}
	}
	if !end.IsZero() {
		a.EndTime, a.FailureClass = &metav1.Time{Time: end}, string(class)
	}
	b.run.Status.Attempts = append(b.run.Status.Attempts, a)
	return b
}

// Condition sets a status condition.
func (b *TauRunBuilder) Condition(t string, s metav1.ConditionStatus, reason, msg string) *TauRunBuilder {
	b.run.Status.Conditions = append(b.run.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
	return b
}

// Deleting marks the run as being deleted, held by finalizer.
func (b *TauRunBuilder) Deleting(finalizer string) *TauRunBuilder {
	now := metav1.Now()
	b.run.DeletionTimestamp = &now
	b.run.Finalizers = append(b.run.Finalizers, finalizer)
	return b
}
