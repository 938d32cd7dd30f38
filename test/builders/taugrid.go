package builders

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TauRepositoryBuilder builds a TauRepository.
type TauRepositoryBuilder struct{ repo taugridv1.TauRepository }

// MakeTauRepository starts a repository of url, polled every minute under
// platform "default", at generation 1.
func MakeTauRepository(name, namespace, url string) *TauRepositoryBuilder {
	return &TauRepositoryBuilder{repo: taugridv1.TauRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Generation: 1},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: url}, Platform: "default",
			Interval: metav1.Duration{Duration: time.Minute}}}}
}

// CredentialsSecret names the Secret holding the git credentials.
func (b *TauRepositoryBuilder) CredentialsSecret(name string) *TauRepositoryBuilder {
	b.repo.Spec.SecretRef = &taugridv1.LocalObjectReference{Name: name}
	return b
}

// RunTags sets the run tag patterns.
func (b *TauRepositoryBuilder) RunTags(patterns ...string) *TauRepositoryBuilder {
	b.repo.Spec.Triggers.RunTags = patterns
	return b
}

// Obj is the TauRepository built.
func (b *TauRepositoryBuilder) Obj() *taugridv1.TauRepository { return b.repo.DeepCopy() }

// TauRunBuilder builds a TauRun.
type TauRunBuilder struct{ run taugridv1.TauRun }

// MakeTauRun starts a run of repository "research", target default, from
// a run ref, at generation 1.
func MakeTauRun(name, namespace string) *TauRunBuilder {
	return &TauRunBuilder{run: taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Generation: 1},
		Spec: taugridv1.TauRunSpec{Repository: "research", Target: "default",
			Commit:  "0123456789abcdef0123456789abcdef01234567",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: taugridv1.RunRefPrefix + name}}}}
}

// Trigger sets how the run was requested.
func (b *TauRunBuilder) Trigger(kind taugridv1.TriggerKind, ref string) *TauRunBuilder {
	b.run.Spec.Trigger = taugridv1.Trigger{Kind: kind, Ref: ref}
	return b
}

// Labels adds labels.
func (b *TauRunBuilder) Labels(kv map[string]string) *TauRunBuilder {
	if b.run.Labels == nil {
		b.run.Labels = map[string]string{}
	}
	for k, v := range kv {
		b.run.Labels[k] = v
	}
	return b
}

// Created sets the creation time.
func (b *TauRunBuilder) Created(t time.Time) *TauRunBuilder {
	b.run.CreationTimestamp = metav1.NewTime(t)
	return b
}

// Obj is the TauRun built.
func (b *TauRunBuilder) Obj() *taugridv1.TauRun { return b.run.DeepCopy() }
