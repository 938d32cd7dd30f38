package builders

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TauPlatformBuilder builds a TauPlatform.
type TauPlatformBuilder struct{ p taugridv1.TauPlatform }

// MakeTauPlatform starts a platform following branch main of url, its
// policy at the repository's root, polled every minute, at generation 1.
func MakeTauPlatform(name, url string) *TauPlatformBuilder {
	return &TauPlatformBuilder{p: taugridv1.TauPlatform{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: taugridv1.TauPlatformSpec{GitSource: taugridv1.GitSource{URL: url}, Ref: "main", Path: ".",
			Interval: metav1.Duration{Duration: time.Minute}}}}
}

// PlatformSecret names the Secret holding the git credentials.
func (b *TauPlatformBuilder) PlatformSecret(name string) *TauPlatformBuilder {
	b.p.Spec.SecretRef = &taugridv1.LocalObjectReference{Name: name}
	return b
}

// PlatformRef sets the branch or tag followed.
func (b *TauPlatformBuilder) PlatformRef(ref string) *TauPlatformBuilder {
	b.p.Spec.Ref = ref
	return b
}

// PlatformSuspended stops the platform's polls.
func (b *TauPlatformBuilder) PlatformSuspended() *TauPlatformBuilder {
	b.p.Spec.Suspend = true
	return b
}

// PlatformDeleting marks the platform as being deleted, held by finalizer.
func (b *TauPlatformBuilder) PlatformDeleting(finalizer string) *TauPlatformBuilder {
	now := metav1.Now()
	b.p.DeletionTimestamp = &now
	b.p.Finalizers = append(b.p.Finalizers, finalizer)
	return b
}

// PlatformGeneration sets the platform's generation.
func (b *TauPlatformBuilder) PlatformGeneration(g int64) *TauPlatformBuilder {
	b.p.Generation = g
	return b
}

// InForce records, in status, the commit whose policy is in force.
func (b *TauPlatformBuilder) InForce(commit string) *TauPlatformBuilder {
	b.p.Status.Commit = commit
	return b
}

// Judged records, in status, that commit was the last one judged, at
// generation observed.
func (b *TauPlatformBuilder) Judged(commit string, observed int64) *TauPlatformBuilder {
	b.p.Status.LastAttemptedCommit, b.p.Status.ObservedGeneration = commit, observed
	return b
}

// PlatformCondition sets a status condition.
func (b *TauPlatformBuilder) PlatformCondition(t string, s metav1.ConditionStatus, reason, msg string) *TauPlatformBuilder {
	b.p.Status.Conditions = append(b.p.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
	return b
}

// Obj is the TauPlatform built.
func (b *TauPlatformBuilder) Obj() *taugridv1.TauPlatform { return b.p.DeepCopy() }

// LocalQueueBuilder builds a Kueue LocalQueue.
type LocalQueueBuilder struct{ lq kueue.LocalQueue }

// MakeLocalQueue starts a LocalQueue submitting to ClusterQueue cq.
func MakeLocalQueue(name, namespace, cq string) *LocalQueueBuilder {
	return &LocalQueueBuilder{lq: kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq)}}}
}

// AppliedBy labels the LocalQueue as platform's, as the platform
// reconciler labels what it applies.
func (b *LocalQueueBuilder) AppliedBy(platform string) *LocalQueueBuilder {
	b.lq.Labels = appliedBy(b.lq.Labels, platform)
	return b
}

// Obj is the LocalQueue built.
func (b *LocalQueueBuilder) Obj() *kueue.LocalQueue { return b.lq.DeepCopy() }

// AppliedBy labels the ClusterQueue as platform's, as the platform
// reconciler labels what it applies.
func (b *ClusterQueueBuilder) AppliedBy(platform string) *ClusterQueueBuilder {
	b.cq.Labels = appliedBy(b.cq.Labels, platform)
	return b
}

func appliedBy(labels map[string]string, platform string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	labels[taugridv1.LabelPlatform] = platform
	labels[render.LabelManagedBy] = render.ManagedBy
	return labels
}
