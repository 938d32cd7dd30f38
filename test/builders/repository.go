package builders

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Branches sets the watched branch patterns.
func (b *TauRepositoryBuilder) Branches(patterns ...string) *TauRepositoryBuilder {
	b.repo.Spec.Triggers.Branches = patterns
	return b
}

// RunRefPrefix sets where run refs are pushed.
func (b *TauRepositoryBuilder) RunRefPrefix(prefix string) *TauRepositoryBuilder {
	b.repo.Spec.Triggers.RunRefPrefix = prefix
	return b
}

// WebhookSecret names the Secret holding the webhook token.
func (b *TauRepositoryBuilder) WebhookSecret(name string) *TauRepositoryBuilder {
	b.repo.Spec.Webhook = &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: name}}
	return b
}

// Verification requires signatures of mode ("ssh" or "openpgp") by the
// keys in Secret secret.
func (b *TauRepositoryBuilder) Verification(mode, secret string) *TauRepositoryBuilder {
	b.repo.Spec.Verification = &taugridv1.Verification{Mode: mode, SecretRef: taugridv1.LocalObjectReference{Name: secret}}
	return b
}

// Suspended stops the repository's polling.
func (b *TauRepositoryBuilder) Suspended() *TauRepositoryBuilder {
	b.repo.Spec.Suspend = true
	return b
}

// RepositoryDeleting marks the repository as being deleted, held by
// finalizer.
func (b *TauRepositoryBuilder) RepositoryDeleting(finalizer string) *TauRepositoryBuilder {
	now := metav1.Now()
	b.repo.DeletionTimestamp = &now
	b.repo.Finalizers = append(b.repo.Finalizers, finalizer)
	return b
}

// RepositoryUID sets the repository's UID.
func (b *TauRepositoryBuilder) RepositoryUID(uid string) *TauRepositoryBuilder {
	b.repo.UID = types.UID(uid)
	return b
}

// RepositoryGeneration sets the repository's generation.
func (b *TauRepositoryBuilder) RepositoryGeneration(g int64) *TauRepositoryBuilder {
	b.repo.Generation = g
	return b
}

// Nudged sets the nudge annotation, asking for a poll now.
func (b *TauRepositoryBuilder) Nudged(at string) *TauRepositoryBuilder {
	if b.repo.Annotations == nil {
		b.repo.Annotations = map[string]string{}
	}
	b.repo.Annotations[taugridv1.AnnotationNudge] = at
	return b
}

// Polled records, in status, a poll at t that handled generation g.
func (b *TauRepositoryBuilder) Polled(t time.Time, g int64) *TauRepositoryBuilder {
	pt := metav1.NewTime(t)
	b.repo.Status.LastPollTime, b.repo.Status.ObservedGeneration = &pt, g
	return b
}

// WebhookPath records, in status, the published webhook path.
func (b *TauRepositoryBuilder) WebhookPath(p string) *TauRepositoryBuilder {
	b.repo.Status.WebhookPath = p
	return b
}

// ValidatedHeads records, in status, pull request heads validated.
func (b *TauRepositoryBuilder) ValidatedHeads(commits ...string) *TauRepositoryBuilder {
	b.repo.Status.ValidatedHeads = append(b.repo.Status.ValidatedHeads, commits...)
	return b
}
