package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"

	"github.com/taugrid/taugrid/controllers/forgestatus"
)

// A refused run ref gets one failure status on its commit, naming the ref
// and the reason, however often the reporter runs and whatever its cache
// shows; a ref refused later gets its own.
func TestARefusedRunRefGetsOneFailureStatusOnItsCommit(t *testing.T) {
	f := newForgeFixture(t, "rf1", forge.Gitea, forgeToken)
	ref := f.research.runRef("r-dotted", "target: exp.v2\n")
	commit := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	f.poll(t)
	stale := f.get(t)
	rep := &forgestatus.RefusalReporter{Client: k8s, Posters: f.r.Posters, Recorder: f.rec}
	for range 3 {
		if _, err := rep.Reconcile(context.Background(), requestFor(f.repo)); err != nil {
			t.Fatal(err)
		}
	}
	lagging := &forgestatus.RefusalReporter{Client: laggingCache{Client: k8s, old: stale}, Posters: f.r.Posters, Recorder: f.rec}
	if res, err := lagging.Reconcile(context.Background(), requestFor(f.repo)); err != nil || res.RequeueAfter == 0 {
		t.Errorf("a reporter reading a stale repository: %+v, %v; want a requeue, no post", res, err)
	}
	calls := f.srv.Accepted()
	if len(calls) != 1 {
		t.Fatalf("%d statuses posted, want 1: %+v", len(calls), calls)
	}
	got := calls[0]
	want := forgetest.Call{SHA: commit, Context: "tau/r-dotted", State: "failure", Description: got.Description}
	got.Owner, got.Repo, got.Code = "", "", 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the refusal's status (-want +got):\n%s", diff)
	}
	if d := got.Description; !strings.HasPrefix(d, `refs/tau/runs/r-dotted will not run: invalid run request: line 1: target: "exp.v2" is not a target name`) ||
		len([]rune(d)) > forge.MaxDescription {
		t.Errorf("description %q, want the ref and the reason in %d characters", d, forge.MaxDescription)
	}
	if got := f.get(t).Status.ReportedRefusals; len(got) != 1 || !strings.HasPrefix(got[0], ref+"@") {
		t.Errorf("reportedRefusals = %v", got)
	}

	f.research.runRef("r-upper", "target: Exp_V2\n")
	f.poll(t)
	if _, err := rep.Reconcile(context.Background(), requestFor(f.repo)); err != nil {
		t.Fatal(err)
	}
	if calls := f.srv.Accepted(); len(calls) != 2 || calls[1].Context != "tau/r-upper" {
		t.Errorf("the second refusal: %+v", calls)
	}
	for len(f.rec.Events) > 0 {
		if e := <-f.rec.Events; strings.Contains(e, forgeToken) {
			t.Errorf("the forge token shows in %q", e)
		}
	}
}
