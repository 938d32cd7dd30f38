package gitsource

import (
	"fmt"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFingerprintsRoundTripInAboutFiveBytesARef(t *testing.T) {
	refs := RefSet{}
	for i := range 20_000 {
		refs[fmt.Sprintf("refs/tags/run/exp-%05d", i)] = Ref{SHA: fmt.Sprintf("%040x", i*7919)}
	}
	l := RecordRunRefs(refs, RunIndex{})
	enc := l.Unrun.Encode()
	if len(enc) > 20_000*6 {
		t.Errorf("20,000 fingerprints take %d bytes, want at most 6 a ref", len(enc))
	}
	back, err := DecodeFingerprints(enc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.Unrun, back); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	if _, err := DecodeFingerprints([]byte{0x80}); err == nil {
		t.Error("a truncated varint decoded")
	}
}

func TestPreviousRunRefsRebuildsWhatTheLastPollSaw(t *testing.T) {
	const (
		tag    = "refs/tags/run/a"
		runRef = "refs/tau/runs/r-1"
		gone   = "refs/tau/runs/r-gone"
	)
	light := Ref{SHA: "c1"}
	annotated := Ref{SHA: "t1", Peeled: "c1"}
	moved := Ref{SHA: "t2", Peeled: "c2"}
	cur := RefSet{tag: light, runRef: annotated}
	unrun := RecordRunRefs(RefSet{tag: light}, RunIndex{})
	ran := RunIndex{Ran: map[string]bool{RunKey(runRef, "t1"): true}}
	tests := map[string]struct {
		cur     RefSet
		ledger  Ledger
		index   RunIndex
		legacy  RefSet
		first   bool
		want    RefSet
		cancels []Event
	}{
		"an unchanged listing is taken whole, without runs": {
			cur: cur, ledger: RecordRunRefs(cur, ran), want: cur,
		},
		"a ref with a run and an unrun ref are seen; a new one is not": {
			cur: RefSet{tag: light, runRef: annotated, "refs/tau/runs/new": moved}, ledger: Ledger{Digest: "old", Unrun: unrun.Unrun}, index: ran,
			want: cur,
		},
		"a run that predates object keys is found by its commit": {
			cur: cur, ledger: unrun, index: RunIndex{Ran: map[string]bool{RunKey(runRef, "c1"): true}}, want: cur,
		},
		"the first poll sees the run tags already there, not the run refs": {
			cur: cur, first: true, want: RefSet{tag: light},
		},
		"refs an older status recorded count as seen": {
			cur: cur, legacy: RefSet{runRef: annotated}, want: RefSet{runRef: annotated},
		},
		"a live run whose ref went comes back as its old object": {
			cur: RefSet{tag: light}, ledger: Ledger{Digest: "old", Unrun: unrun.Unrun}, index: RunIndex{Ran: map[string]bool{}, Live: []RunTrigger{{Ref: gone, Object: "t9", Commit: "c9"}}},
			want: RefSet{tag: light, gone: {SHA: "t9", Peeled: "c9"}},
		},
		"a live run whose ref moved to a ref with a run is cancelled": {
			cur: RefSet{runRef: moved}, index: RunIndex{Ran: map[string]bool{RunKey(runRef, "t2"): true}, Live: []RunTrigger{{Ref: runRef, Object: "t1", Commit: "c1"}}},
			want: RefSet{runRef: moved}, cancels: []Event{{Kind: KindCancel, Ref: runRef, Commit: "c1", Tag: "t1"}},
		},
		"a live run still at its ref is left alone": {
			cur: cur, ledger: unrun, index: RunIndex{Ran: ran.Ran, Live: []RunTrigger{{Ref: runRef, Object: "t1", Commit: "c1"}}}, want: cur,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			prev, cancels := PreviousRunRefs(tc.cur, Triggers{}, tc.ledger, tc.index, tc.legacy, tc.first)
			if diff := cmp.Diff(tc.want, prev); diff != "" {
				t.Errorf("previous refs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.cancels, cancels); diff != "" {
				t.Errorf("cancellations (-want +got):\n%s", diff)
			}
		})
	}
}

// Detect on the rebuilt refs gives what it gave on the stored ones: the
// new ref runs, the deleted one's live run is cancelled.
func TestDetectOnRebuiltRefsStartsTheNewAndCancelsTheGone(t *testing.T) {
	last := RefSet{"refs/tags/run/a": {SHA: "c1"}, "refs/tags/run/b": {SHA: "c2"}}
	ix := RunIndex{Ran: map[string]bool{RunKey("refs/tags/run/b", "c2"): true},
		Live: []RunTrigger{{Ref: "refs/tags/run/b", Object: "c2", Commit: "c2"}}}
	ledger := RecordRunRefs(last, ix)
	cur := maps.Clone(last)
	delete(cur, "refs/tags/run/b")
	cur["refs/tags/run/c"] = Ref{SHA: "c3"}
	prev, _ := PreviousRunRefs(cur, Triggers{}, ledger, ix, nil, false)
	d, err := Detect(prev, cur, Triggers{}, newGraph())
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Kind: KindCancel, Ref: "refs/tags/run/b", Commit: "c2"},
		{Kind: KindRunTag, Ref: "refs/tags/run/c", Commit: "c3", Target: "default"},
	}
	if diff := cmp.Diff(want, d.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// The digest names the run refs and their objects, whatever the listing's
// order: a ref added, gone or moved changes it, a branch does not.
func TestTheRunRefsDigestNamesTheRunRefsAndTheirObjects(t *testing.T) {
	sha := func(i int) string { return fmt.Sprintf("%040x", i) }
	refs := RefSet{"refs/heads/main": {SHA: sha(1)}}
	for i := range 100 {
		refs[fmt.Sprintf("refs/tags/run/sweep-%03d", i)] = Ref{SHA: sha(100 + i)}
	}
	refs["refs/tau/run/abc"] = Ref{SHA: sha(7), Peeled: sha(8)}
	d := RunRefsDigest(refs)
	if len(d) != 32 {
		t.Fatalf("digest %q: want 32 hex digits", d)
	}
	same := maps.Clone(refs)
	if got := RunRefsDigest(same); got != d {
		t.Errorf("the same refs give %s, want %s", got, d)
	}
	for name, change := range map[string]func(RefSet){
		"a tag added":     func(r RefSet) { r["refs/tags/run/new"] = Ref{SHA: sha(2)} },
		"a tag gone":      func(r RefSet) { delete(r, "refs/tags/run/sweep-042") },
		"a tag moved":     func(r RefSet) { r["refs/tags/run/sweep-042"] = Ref{SHA: sha(3)} },
		"a run ref moved": func(r RefSet) { r["refs/tau/run/abc"] = Ref{SHA: sha(9)} },
		"two tags swapped": func(r RefSet) {
			a, b := r["refs/tags/run/sweep-001"], r["refs/tags/run/sweep-002"]
			r["refs/tags/run/sweep-001"], r["refs/tags/run/sweep-002"] = b, a
		},
	} {
		r := maps.Clone(refs)
		change(r)
		if RunRefsDigest(r) == d {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	branch := maps.Clone(refs)
	branch["refs/heads/main"] = Ref{SHA: sha(4)}
	branch["refs/heads/dev"] = Ref{SHA: sha(5)}
	if got := RunRefsDigest(branch); got != d {
		t.Errorf("a branch moved and one added: digest %s, want %s (branches are recorded apart)", got, d)
	}
}
