package shared

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// ConditionEvidence says whether every ended attempt of a run has a sealed
// evidence bundle. False means a bundle is being sealed (Sealing) or the
// store failed and the bundle is retried; the run's phase never depends on
// it.
const ConditionEvidence = "EvidenceSealed"

// Evidence condition and event reasons.
const (
	ReasonEvidenceSealed = "Sealed"
)

// EndedAttempts are the attempts whose end the status shows: those with
// an end time, and the last one once the run is over.
func EndedAttempts(run *taugridv1.TauRun) []int {
	var out []int
	for i, a := range run.Status.Attempts {
		if a.EndTime != nil || (i == len(run.Status.Attempts)-1 && run.Status.Phase.Final()) {
			out = append(out, a.Number)
		}
	}
	return out
}
