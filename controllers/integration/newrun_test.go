package integration

import (
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// A run the repository controller just created reads Pending, with a line
// saying so, before the run controller has looked at it (the schema's
// default, served by the API server): no run is listed without a phase.
// Its first recorded phases are still the run controller's, with times.
func TestANewRunReadsPendingBeforeTheControllerLooks(t *testing.T) {
	f := newRunFixture(t, "np")
	f.research.runRef("one", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/one")
	if run.Status.Phase != taugridv1.PhasePending || run.Status.Message != "accepted: preparing the run" || len(run.Status.Phases) != 0 {
		t.Fatalf("a new run reads phase %q, message %q, phases %v; want Pending, %q and none recorded",
			run.Status.Phase, run.Status.Message, run.Status.Phases, "accepted: preparing the run")
	}
	got := f.reconcileRun(t, run.Name, taugridv1.PhaseQueued)
	var phases []taugridv1.RunPhase
	for _, p := range got.Status.Phases {
		if p.Time.IsZero() {
			t.Errorf("phase %s recorded without a time", p.Phase)
		}
		phases = append(phases, p.Phase)
	}
	if len(phases) != 2 || phases[0] != taugridv1.PhasePending || phases[1] != taugridv1.PhaseQueued {
		t.Errorf("phases recorded %v, want [Pending Queued]", phases)
	}
}
