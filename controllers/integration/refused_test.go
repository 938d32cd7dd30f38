package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
)

// drain returns the events recorded so far.
var drain = sharedtest.Drain

func (f *runFixture) get(t *testing.T) *taugridv1.TauRepository {
	t.Helper()
	repo := &taugridv1.TauRepository{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.repo), repo); err != nil {
		t.Fatal(err)
	}
	return repo
}

// longRunRef pushes a run ref whose name git accepts but is longer than a
// TauRun's spec.trigger.ref may be: the parser accepts its request, the
// API server refuses the TauRun.
func (f *runFixture) longRunRef(t *testing.T) string {
	t.Helper()
	id := strings.Repeat("a", 200) + "/" + strings.Repeat("b", 200) + "/" + strings.Repeat("c", 200) + "/" +
		strings.Repeat("d", 200) + "/" + strings.Repeat("e", 200) + "/" + strings.Repeat("f", 200)
	return f.research.runRef(id, "target: default\n")
}

// A valid run tag pushed after malformed run refs runs, is recorded and is
// cancelled by deleting its tag; each bad ref is reported on its own (an
// Event, status.refusedRefs, the RefsRefused condition) and the poll that
// saw them succeeds.
func TestAValidRunTagAfterMalformedRunRefsRunsAndIsCancelledByDeletingIt(t *testing.T) {
	f := newRunFixture(t, "rt13")
	rec := f.repos.Recorder.(*events.FakeRecorder)
	drain(rec)
	dotted := f.research.runRef("r-dotted", "target: exp.v2\n")
	upper := f.research.runRef("r-upper", "target: Exp_V2\n")
	long := f.longRunRef(t)
	f.research.tag("run/good")
	f.poll(t)

	good := f.runOf(t, "refs/tags/run/good")
	if good.Spec.Target != "default" {
		t.Errorf("the run tag's run: %+v", good.Spec)
	}
	if n := len(f.listRuns(t)); n != 1 {
		t.Errorf("%d runs, want only the run tag's", n)
	}
	repo := f.get(t)
	// The run tag is recorded by its TauRun, the three refused refs as
	// unrun fingerprints.
	if l := repo.Status.RunRefs; l == nil || l.Count != 4 || len(unrunOf(t, repo)) != 3 {
		t.Errorf("runRefs = %+v, want 4 refs with 3 unrun", l)
	}
	got := map[string]string{}
	for _, r := range repo.Status.RefusedRefs {
		got[r.Ref] = r.Reason + ": " + r.Message
	}
	want := map[string]string{
		dotted: repoctrl.ReasonBadRunRequest + `: invalid run request: line 1: target: "exp.v2" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/exp-v2.yaml?)`,
		upper:  repoctrl.ReasonBadRunRequest + `: invalid run request: line 1: target: "Exp_V2" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/exp-v2.yaml?)`,
	}
	for ref, msg := range want {
		if got[ref] != msg {
			t.Errorf("refusal of %s:\n got %q\nwant %q", ref, got[ref], msg)
		}
	}
	if m := got[long]; !strings.HasPrefix(m, repoctrl.ReasonRunRefused+": the cluster refused TauRun research-") || !strings.Contains(m, "spec.trigger.ref: Too long") {
		t.Errorf("refusal of the long ref = %q, want the API server's words", m)
	}
	cond := apimeta.FindStatusCondition(repo.Status.Conditions, taugridv1.ConditionRefsRefused)
	if cond == nil || cond.Status != "True" || !strings.HasPrefix(cond.Message, "3 refs request runs that will not start") ||
		!strings.Contains(cond.Message, dotted) || !strings.Contains(cond.Message, upper) {
		t.Errorf("RefsRefused = %+v, want True naming the refs", cond)
	}
	ready := apimeta.FindStatusCondition(repo.Status.Conditions, taugridv1.ConditionReady)
	if ready == nil || ready.Status != "True" || !strings.HasSuffix(ready.Message, "; 3 refused (condition RefsRefused)") {
		t.Errorf("Ready = %+v, want True saying 3 refs were refused", ready)
	}
	warnings := 0
	for _, e := range drain(rec) {
		if strings.HasPrefix(e, "Warning ") {
			warnings++
		}
	}
	if warnings != 3 {
		t.Errorf("%d Warning events, want one per refused ref", warnings)
	}

	f.poll(t) // nothing new: no event, no write
	if evs := drain(rec); len(evs) != 0 {
		t.Errorf("an idle poll repeated events: %q", evs)
	}
	if again := f.get(t); again.ResourceVersion != repo.ResourceVersion {
		t.Errorf("an idle poll rewrote the status: %s", cmp.Diff(repo.Status, again.Status))
	}

	f.research.deleteRemoteTag("run/good")
	f.research.git("-C", f.research.work, "push", "--quiet", "origin", ":"+dotted)
	f.poll(t)
	if r := f.runOf(t, "refs/tags/run/good"); !r.Spec.Cancel {
		t.Errorf("deleting the run tag did not cancel its run: %+v", r.Spec)
	}
	repo = f.get(t)
	if n := len(repo.Status.RefusedRefs); n != 2 {
		t.Errorf("%d refused refs after deleting one of 3, want 2: %+v", n, repo.Status.RefusedRefs)
	}
}

// Refusals stay bounded however many bad refs are pushed.
func TestRefusedRefsAreBounded(t *testing.T) {
	repo := &taugridv1.TauRepository{}
	r := &repoctrl.RepositoryReconciler{Clock: fixedClock(), Recorder: events.NewFakeRecorder(100)}
	for i := range 3 * taugridv1.MaxRefusedRefs {
		r.Refuse(repo, problem(i), repoctrl.ReasonBadRunRequest)
	}
	if n := len(repo.Status.RefusedRefs); n != taugridv1.MaxRefusedRefs {
		t.Fatalf("%d refused refs kept, want %d", n, taugridv1.MaxRefusedRefs)
	}
	if got := repo.Status.RefusedRefs[0].Ref; got != problem(3*taugridv1.MaxRefusedRefs-1).Ref {
		t.Errorf("newest first: got %s", got)
	}
	r.SetRefusedCondition(repo)
	cond := apimeta.FindStatusCondition(repo.Status.Conditions, taugridv1.ConditionRefsRefused)
	if cond == nil || len(cond.Message) > 1200 || !strings.HasSuffix(cond.Message, "; and 15 more in status.refusedRefs") {
		t.Errorf("RefsRefused = %+v, want a bounded message", cond)
	}
}

func fixedClock() *clocktesting.FakePassiveClock {
	return clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC))
}

func problem(i int) gitsource.Problem {
	return gitsource.Problem{Ref: fmt.Sprintf("refs/tau/runs/r-%03d", i), SHA: strings.Repeat("a", 40), Commit: strings.Repeat("c", 40),
		Err: fmt.Errorf("invalid run request: line 1: target: %q is not a target name", "exp.v2")}
}
