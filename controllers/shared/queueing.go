package shared

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// Since is when the run last entered phase.
func Since(run *taugridv1.TauRun, phase taugridv1.RunPhase) time.Time {
	for i := len(run.Status.Phases) - 1; i >= 0; i-- {
		if run.Status.Phases[i].Phase == phase {
			return run.Status.Phases[i].Time.Time
		}
	}
	return time.Time{}
}
