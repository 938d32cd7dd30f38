package repository

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	c1, c2, c3 = sha("1"), sha("2"), sha("3")
	tauV1      = map[string]string{"tau.yaml": "command: train v1", "train.py": "print(1)"}
	tauV2      = map[string]string{"tau.yaml": "command: train v2", "train.py": "print(1)"}
)

// registered is a repository with a main branch at c1 and an old run tag,
// as it is when a TauRepository is created for it.
func registered(g *fakeGit) {
	g.commit(c1, "", tauV1)
	g.refs["refs/heads/main"] = at(c1)
	g.refs["refs/tags/run/old"] = at(c1)
}

// TestAPollStartsEachRunOnce polls a repository as registered, then after
// a push, then once more: what the push requests runs exactly once, with
// its deterministic name, and nothing there before registration but run
// refs runs at all.
func TestAPollStartsEachRunOnce(t *testing.T) {
	cases := map[string]struct {
		repo   *taugridv1.TauRepository
		before func(g *fakeGit) // the repository when registered
		push   func(g *fakeGit) // then pushed
		want   []runSummary
	}{
		"a run tag pushed after registration": {
			before: registered,
			push:   func(g *fakeGit) { g.commit(c2, c1, tauV2); g.refs["refs/tags/run/lr"] = at(c2) },
			want:   []runSummary{want(taugridv1.TriggerRunTag, "refs/tags/run/lr", c2, "default", "", "")},
		},
		"a run ref pushed before registration runs on the first poll": {
			before: func(g *fakeGit) { registered(g); g.refs["refs/tau/runs/early"] = at(c1) },
			push:   func(*fakeGit) {},
			want:   []runSummary{want(taugridv1.TriggerRunRef, "refs/tau/runs/early", c1, "default", "", "")},
		},
		"an annotated run ref runs the target, overrides and requester its message asks": {
			before: registered,
			push: func(g *fakeGit) {
				g.refs["refs/tau/runs/r-1"] = g.annotated(sha("a1"), "r-1", c1,
					"target: ray\noverrides:\n  compute.gpus: \"2\"\nrequester: carol@example.com\n")
			},
			want: []runSummary{func() runSummary {
				s := want(taugridv1.TriggerRunRef, "refs/tau/runs/r-1", c1, "ray", "carol@example.com", sha("a1"))
				s.Overrides = map[string]string{"compute.gpus": "2"}
				return s
			}()},
		},
		"an annotated run tag with a plain message runs the default target, for its tagger": {
			before: registered,
			push: func(g *fakeGit) {
				g.refs["refs/tags/run/note"] = g.annotated(sha("b1"), "run/note", c1, "trying a bigger batch")
			},
			want: []runSummary{want(taugridv1.TriggerRunTag, "refs/tags/run/note", c1, "default", "bob@example.com", sha("b1"))},
		},
		"two run refs at one commit run twice": {
			before: registered,
			push:   func(g *fakeGit) { g.refs["refs/tau/runs/a"] = at(c1); g.refs["refs/tau/runs/b"] = at(c1) },
			want: sortedSummaries(want(taugridv1.TriggerRunRef, "refs/tau/runs/a", c1, "default", "", ""),
				want(taugridv1.TriggerRunRef, "refs/tau/runs/b", c1, "default", "", "")),
		},
		"a commit on a watched branch that changes tau.yaml": {
			repo:   research().Branches("main").Obj(),
			before: registered,
			push:   func(g *fakeGit) { g.commit(c2, c1, tauV2); g.refs["refs/heads/main"] = at(c2) },
			want:   []runSummary{want(taugridv1.TriggerBranchChange, "refs/heads/main", c2, "default", "alice@example.com", "")},
		},
		"a commit on a watched branch that adds tau/ray.yaml runs the ray target": {
			repo:   research().Branches("main").Obj(),
			before: registered,
			push: func(g *fakeGit) {
				g.commit(c2, c1, map[string]string{"tau.yaml": "command: train v1", "tau/ray.yaml": "engine: ray"})
				g.refs["refs/heads/main"] = at(c2)
			},
			want: []runSummary{want(taugridv1.TriggerBranchChange, "refs/heads/main", c2, "ray", "alice@example.com", "")},
		},
		"a commit on a watched branch that changes no tau file starts nothing": {
			repo:   research().Branches("main").Obj(),
			before: registered,
			push: func(g *fakeGit) {
				g.commit(c2, c1, map[string]string{"tau.yaml": "command: train v1", "train.py": "print(2)"})
				g.refs["refs/heads/main"] = at(c2)
			},
		},
		"a commit on a branch that is not watched starts nothing": {
			before: registered,
			push:   func(g *fakeGit) { g.commit(c2, c1, tauV2); g.refs["refs/heads/main"] = at(c2) },
		},
		"a tag no run pattern matches starts nothing": {
			before: registered,
			push:   func(g *fakeGit) { g.refs["refs/tags/v1.0"] = at(c1) },
		},
		"run tags already there when registered start nothing": {
			before: func(g *fakeGit) { registered(g); g.refs["refs/tags/run/older"] = at(c1) },
			push:   func(*fakeGit) {},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := tc.repo
			if repo == nil {
				repo = research().Obj()
			}
			w := newRepoWorld(t, nil, repo)
			tc.before(w.git)
			w.mustReconcile(t)
			tc.push(w.git)
			w.mustReconcile(t)
			requested := reasons(w.drain())
			w.mustReconcile(t)
			if diff := cmp.Diff(tc.want, summarize(w.runs(t))); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			var wantEvents []string
			if len(tc.want) > 0 {
				wantEvents = []string{"Normal RunRequested"} // one per poll, however many runs
			}
			if diff := cmp.Diff(wantEvents, requested); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if evs := w.drain(); len(evs) > 0 {
				t.Errorf("the poll after the push recorded %q, want nothing", evs)
			}
			got := w.repo(t)
			if diff := cmp.Diff([]string{"Ready=True/Polled"}, conditions(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d at generation %d", got.Status.ObservedGeneration, got.Generation)
			}
		})
	}
}

func sortedSummaries(s ...runSummary) []runSummary {
	return slices.SortedFunc(slices.Values(s), func(a, b runSummary) int { return strings.Compare(a.Name, b.Name) })
}

// TestARunIsLabelledForItsRepositoryRefAndCommit: what the cancellation
// and the run index find a run by.
func TestARunIsLabelledForItsRepositoryRefAndCommit(t *testing.T) {
	ev := gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/r-1", Commit: c1, Tag: sha("a1")}
	run := NewRun(research().Obj(), ev)
	wantMeta := metav1.ObjectMeta{
		Name: runs.RunName("research", "refs/tau/runs/r-1", c1, "default"), Namespace: ns,
		Labels: map[string]string{render.LabelRepository: "research", render.LabelManagedBy: render.ManagedBy,
			taugridv1.LabelRefHash: runs.RefHash("refs/tau/runs/r-1"), taugridv1.LabelCommit: c1},
		Annotations: map[string]string{AnnotationRefObject: sha("a1")},
	}
	if diff := cmp.Diff(wantMeta, run.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	wantSpec := taugridv1.TauRunSpec{Repository: "research", Commit: c1, Target: "default",
		Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: "refs/tau/runs/r-1"}}
	if diff := cmp.Diff(wantSpec, run.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}

// TestThePollRecordsWhatItSaw: the watched branches in observedRefs, run
// refs in the ledger, the count, and the poll's time.
func TestThePollRecordsWhatItSaw(t *testing.T) {
	w := newRepoWorld(t, nil, research().Branches("main").Obj())
	registered(w.git)
	w.git.refs["refs/heads/scratch"] = at(c1)
	w.git.refs["refs/tau/runs/x"] = at(c1)
	w.mustReconcile(t)
	st := w.repo(t).Status
	if diff := cmp.Diff([]taugridv1.ObservedRef{{Name: "refs/heads/main", SHA: c1}}, st.ObservedRefs); diff != "" {
		t.Errorf("observedRefs (-want +got):\n%s", diff)
	}
	if st.RefCount != 3 || st.RunRefs == nil || st.RunRefs.Count != 2 || st.RunRefs.Digest == "" {
		t.Errorf("refCount %d, runRefs %+v; want 3 watched refs, 2 of them run refs, and a digest", st.RefCount, st.RunRefs)
	}
	if st.LastPollTime == nil || !st.LastPollTime.Time.Equal(sharedtest.Now) {
		t.Errorf("lastPollTime %v, want %v", st.LastPollTime, sharedtest.Now)
	}
	if got, want := readyMessage(w.repo(t)), "watching 3 refs"; got != want {
		t.Errorf("Ready says %q, want %q", got, want)
	}
}

// TestAnIdlePollWritesNothing: the same refs again leave the repository
// as it was, until ten intervals passed, when the poll time is refreshed.
func TestAnIdlePollWritesNothing(t *testing.T) {
	w := newRepoWorld(t, nil, research().Obj())
	clk := sharedtest.Clock()
	w.r.Clock = clk
	registered(w.git)
	w.mustReconcile(t)
	before := w.repo(t)
	clk.Step(9 * before.Spec.Interval.Duration)
	w.mustReconcile(t)
	if got := w.repo(t); got.ResourceVersion != before.ResourceVersion {
		t.Errorf("an idle poll wrote the repository (resourceVersion %s -> %s)", before.ResourceVersion, got.ResourceVersion)
	}
	clk.Step(before.Spec.Interval.Duration)
	w.mustReconcile(t)
	if got := w.repo(t).Status.LastPollTime; got == nil || !got.Time.Equal(clk.Now()) {
		t.Errorf("after ten intervals lastPollTime = %v, want %v", got, clk.Now())
	}
}

// TestOnePollOneEvent: a poll that requests many runs says so in one
// event, naming the first RequestsNamed and counting the rest.
func TestOnePollOneEvent(t *testing.T) {
	w := newRepoWorld(t, nil, research().Obj())
	registered(w.git)
	w.mustReconcile(t)
	for i := range RequestsNamed + 2 {
		w.git.refs[fmt.Sprintf("refs/tau/runs/r-%d", i)] = at(c1)
	}
	w.mustReconcile(t)
	evs := w.drain()
	if len(evs) != 1 {
		t.Fatalf("events %q, want one", evs)
	}
	first := want(taugridv1.TriggerRunRef, "refs/tau/runs/r-0", c1, "default", "", "")
	wantPrefix := fmt.Sprintf("Normal RunRequested 7 runs requested: RunRef refs/tau/runs/r-0 at %s (target default): TauRun %s; ", c1[:12], first.Name)
	wantSuffix := "; and 2 more (kubectl get tauruns -l taugrid.dev/repository=research)"
	if e := evs[0]; len(e) < len(wantPrefix) || e[:len(wantPrefix)] != wantPrefix || e[len(e)-len(wantSuffix):] != wantSuffix {
		t.Errorf("event\n%s\nwant it to start with\n%s\nand end with\n%s", e, wantPrefix, wantSuffix)
	}
	if n := len(w.runs(t)); n != RequestsNamed+2 {
		t.Errorf("%d runs, want %d", n, RequestsNamed+2)
	}
}

// TestARunThatAlreadyExistsIsNotRequestedAgain: a run created by an
// earlier poll whose status write was lost (the crash between creation
// and record) is neither created again nor announced.
func TestARunThatAlreadyExistsIsNotRequestedAgain(t *testing.T) {
	ev := gitsource.Event{Kind: gitsource.KindRunRef, Ref: "refs/tau/runs/x", Commit: c1, Target: "default"}
	existing := NewRun(research().Obj(), ev)
	w := newRepoWorld(t, nil, research().Obj(), existing)
	registered(w.git)
	w.git.refs["refs/tau/runs/x"] = at(c1)
	w.mustReconcile(t)
	if evs := w.drain(); len(evs) > 0 {
		t.Errorf("events %q, want none", evs)
	}
	if diff := cmp.Diff([]runSummary{want(taugridv1.TriggerRunRef, "refs/tau/runs/x", c1, "default", "", "")}, summarize(w.runs(t))); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}

// TestANewlyWatchedBranchCountsAsHistory: after the triggers change to
// watch a branch, its current head is not a change; its next commit is.
func TestANewlyWatchedBranchCountsAsHistory(t *testing.T) {
	w := newRepoWorld(t, nil, research().Obj())
	registered(w.git)
	w.git.commit(c2, c1, tauV2)
	w.git.refs["refs/heads/exp"] = at(c2)
	w.mustReconcile(t)
	repo := w.repo(t)
	repo.Spec.Triggers.Branches = []string{"exp"}
	repo.Generation = 2
	if err := w.c.Update(t.Context(), repo); err != nil {
		t.Fatal(err)
	}
	w.mustReconcile(t)
	if n := len(w.runs(t)); n != 0 {
		t.Fatalf("%d runs for a branch that just became watched, want none", n)
	}
	w.git.commit(c3, c2, map[string]string{"tau.yaml": "command: train v3"})
	w.git.refs["refs/heads/exp"] = at(c3)
	w.mustReconcile(t)
	if diff := cmp.Diff([]runSummary{want(taugridv1.TriggerBranchChange, "refs/heads/exp", c3, "default", "alice@example.com", "")},
		summarize(w.runs(t))); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}
