package builders

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// ReportsTo makes the repository report to a forge of type t at apiURL, with
// the credentials in Secret secret.
func (b *TauRepositoryBuilder) ReportsTo(t taugridv1.ForgeType, apiURL, secret string) *TauRepositoryBuilder {
	b.repo.Spec.Forge = &taugridv1.Forge{Type: t, APIURL: apiURL, SecretRef: taugridv1.LocalObjectReference{Name: secret}}
	return b
}

// ForgeRefusal records, in status, a ref refused at commit (a lightweight
// ref: its SHA is the commit) with a message.
func (b *TauRepositoryBuilder) ForgeRefusal(ref, commit, msg string) *TauRepositoryBuilder {
	b.repo.Status.RefusedRefs = append(b.repo.Status.RefusedRefs,
		taugridv1.RefusedRef{Ref: ref, SHA: commit, Commit: commit, Reason: "BadRunRequest", Message: msg})
	return b
}

// ForgeReported records refusals already posted, as ref@sha keys.
func (b *TauRepositoryBuilder) ForgeReported(keys ...string) *TauRepositoryBuilder {
	b.repo.Status.ReportedRefusals = append(b.repo.Status.ReportedRefusals, keys...)
	return b
}

// ForgeRecord sets status.forge, the record of the last status posted.
func (b *TauRunBuilder) ForgeRecord(rec taugridv1.ForgeStatus) *TauRunBuilder {
	b.run.Status.Forge = rec.DeepCopy()
	return b
}

// EvidenceLink sets the link to the run's evidence page.
func (b *TauRunBuilder) EvidenceLink(u string) *TauRunBuilder {
	b.run.Status.EvidenceURL = u
	return b
}
