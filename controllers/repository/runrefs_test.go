package repository

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
)

// runOf is the TauRun research's poll creates for ev.
func runOf(ev gitsource.Event) *taugridv1.TauRun {
	if ev.Target == "" {
		ev.Target = "default"
	}
	return NewRun(research().Obj(), ev)
}

// TestRunIndex: which run tags and run refs of the repository have a
// TauRun (by ref and the object it named), and which of those still go.
func TestRunIndex(t *testing.T) {
	tagged := runOf(gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/a", Commit: c1, Tag: sha("a1")})
	plain := runOf(gitsource.Event{Kind: gitsource.KindRunTag, Ref: "refs/tags/run/b", Commit: c1})
	older := runOf(gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/c", Commit: c2})
	delete(older.Annotations, AnnotationRefObject) // created before the annotation existed: its commit stands for it
	finished := runOf(gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/d", Commit: c1})
	finished.Status.Phase = taugridv1.PhaseSucceeded
	cancelled := runOf(gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/e", Commit: c1})
	cancelled.Spec.Cancel = true
	branch := runOf(gitsource.Event{Kind: gitsource.KindBranchChange, Ref: "refs/heads/main", Commit: c1})
	elsewhere := NewRun(otherRepo("other"), gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/z", Commit: c1, Target: "default"})

	w := newRepoWorld(t, nil, tagged, plain, older, finished, cancelled, branch, elsewhere)
	ix, err := w.r.runIndex(context.Background(), research().Obj())
	if err != nil {
		t.Fatal(err)
	}
	wantRan := map[string]bool{
		gitsource.RunKey("refs/tau/runs/a", sha("a1")): true, gitsource.RunKey("refs/tags/run/b", c1): true,
		gitsource.RunKey("refs/tau/runs/c", c2): true, gitsource.RunKey("refs/tau/runs/d", c1): true,
		gitsource.RunKey("refs/tau/runs/e", c1): true,
	}
	if diff := cmp.Diff(wantRan, ix.Ran); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	wantLive := []gitsource.RunTrigger{{Ref: "refs/tau/runs/a", Object: sha("a1"), Commit: c1}, {Ref: "refs/tags/run/b", Object: c1, Commit: c1},
		{Ref: "refs/tau/runs/c", Commit: c2}}
	if diff := cmp.Diff(wantLive, ix.Live, cmpopts.SortSlices(func(a, b gitsource.RunTrigger) bool { return a.Ref < b.Ref })); diff != "" {
		t.Errorf("live (-want +got):\n%s", diff)
	}
}

// otherRepo is a repository of the namespace other than research.
func otherRepo(name string) *taugridv1.TauRepository {
	r := research().Obj()
	r.Name = name
	return r
}

// TestTheLedgerIsRebuiltFromTheRuns: a status whose ledger does not match
// the listing (an older controller's, or one lost) is rebuilt from the
// TauRuns: a ref with its run is not run again, and a second live run of
// one ref, which the previous refs cannot carry, is cancelled.
func TestTheLedgerIsRebuiltFromTheRuns(t *testing.T) {
	stale := runOf(gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/x", Commit: c1})
	current := runOf(gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/x", Commit: c2})
	repo := research().Polled(sharedtest.Now, 1).Obj()
	repo.Status.RunRefs = &taugridv1.RunRefLedger{Digest: "an older listing", Count: 1}
	w := newRepoWorld(t, nil, repo, stale, current)
	w.git.commit(c1, "", tauV1)
	w.git.commit(c2, c1, tauV2)
	w.git.refs["refs/tau/runs/x"] = at(c2)
	w.mustReconcile(t)

	got := map[string]bool{}
	for _, r := range w.runs(t) {
		got[r.Name] = r.Spec.Cancel
	}
	if diff := cmp.Diff(map[string]bool{stale.Name: true, current.Name: false}, got); diff != "" {
		t.Errorf("spec.cancel by run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Normal RunCancelled"}, reasons(w.drain())); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	tr := gitsource.Triggers{}.WithDefaults()
	l := w.repo(t).Status.RunRefs
	if l == nil || l.Digest != gitsource.RunRefsDigest(tr.RunRefs(tr.Watched(w.git.refs))) || l.Count != 1 {
		t.Errorf("ledger %+v, want the listing's digest and its one run ref", l)
	}
}

// TestLedgerOf: no ledger is an empty one; its fingerprints decode.
func TestLedgerOf(t *testing.T) {
	if l, err := ledgerOf(nil); err != nil || l.Digest != "" || len(l.Unrun) != 0 {
		t.Errorf("ledgerOf(nil) = %+v, %v; want an empty ledger", l, err)
	}
	fps := gitsource.Fingerprints{3, 70, 1 << 40}
	l, err := ledgerOf(&taugridv1.RunRefLedger{Digest: "d", Unrun: fps.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gitsource.Ledger{Digest: "d", Unrun: fps}, l); diff != "" {
		t.Errorf("ledger (-want +got):\n%s", diff)
	}
	if _, err := ledgerOf(&taugridv1.RunRefLedger{Digest: "d", Unrun: []byte{0xff}}); err == nil {
		t.Error("a malformed ledger decoded")
	}
}
