package integration

import (
	"testing"
	"time"

	"github.com/taugrid/taugrid/forge"
)

// A run waiting for the forge credential's budget writes nothing: at 1,000
// runs sharing one token (hack/scale), each try wrote status.forge in
// flight and put it back, 100 status patches a second with nothing to do.
func TestARunWaitingForTheForgesBudgetWritesNothingUntilATokenIsThere(t *testing.T) {
	f := newForgeFixture(t, "fb1", forge.Gitea, forgeToken)
	f.r.Posters.Buckets = &forge.Buckets{Rate: 1, Burst: 1}
	f.research.tag("run/first")
	f.research.tag("run/second")
	f.poll(t)
	first, second := f.runOf(t, "refs/tags/run/first"), f.runOf(t, "refs/tags/run/second")

	f.mustReconcileForge(t, first.Name) // takes the only token
	before := f.getRun(t, second.Name)
	res := f.mustReconcileForge(t, second.Name)
	if res.RequeueAfter < time.Second {
		t.Errorf("the second run with the budget spent requeued after %v, want at least a second", res.RequeueAfter)
	}
	after := f.getRun(t, second.Name)
	if after.ResourceVersion != before.ResourceVersion || after.Status.Forge != nil {
		t.Errorf("waiting for a token wrote the run (resourceVersion %s -> %s, status.forge %+v), want nothing written",
			before.ResourceVersion, after.ResourceVersion, after.Status.Forge)
	}
	if n := len(f.srv.Calls()); n != 1 {
		t.Errorf("%d forge calls, want 1 (the first run's)", n)
	}

	f.clock.Step(time.Second)
	f.mustReconcileForge(t, second.Name)
	if got := f.getRun(t, second.Name).Status.Forge; got == nil || got.InFlight {
		t.Errorf("after a token came back status.forge = %+v, want the post recorded", got)
	}
	if n := len(f.srv.Calls()); n != 2 {
		t.Errorf("%d forge calls after the token came back, want 2", n)
	}
}
