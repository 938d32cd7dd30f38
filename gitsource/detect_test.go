package gitsource

import (
	"errors"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// graph is an in-memory Graph built commit by commit, each a minute after
// the previous one.
type graph struct {
	commits map[string]Commit
	files   map[string]map[string]string // commit -> path -> blob
	tags    map[string]Tag
}

func newGraph() *graph {
	return &graph{commits: map[string]Commit{}, files: map[string]map[string]string{}, tags: map[string]Tag{}}
}

// commit adds sha with parents and its full set of tau files.
func (g *graph) commit(sha string, parents []string, files map[string]string) *graph {
	g.commits[sha] = Commit{SHA: sha, Parents: parents, Author: "Bob <bob@example.com>",
		Time: time.Date(2026, 1, 1, 0, len(g.commits), 0, 0, time.UTC)}
	g.files[sha] = files
	return g
}

// tag adds an annotated tag object.
func (g *graph) tag(sha, target, msg string) *graph {
	g.tags[sha] = Tag{SHA: sha, Name: "t", Target: target, TargetType: "commit", Tagger: "Alice <alice@example.com>", Message: msg}
	return g
}

// forget drops a commit, as if it were beyond the fetched history.
func (g *graph) forget(sha string) *graph {
	delete(g.commits, sha)
	delete(g.files, sha)
	return g
}

func (g *graph) Commit(sha string) (Commit, error) {
	c, ok := g.commits[sha]
	if !ok {
		return Commit{}, fmt.Errorf("%w: commit %s", errMissing, sha)
	}
	return c, nil
}

func (g *graph) Tag(sha string) (Tag, error) {
	t, ok := g.tags[sha]
	if !ok {
		return Tag{}, fmt.Errorf("%w: tag %s", errMissing, sha)
	}
	return t, nil
}

func (g *graph) TauFiles(commit string, patterns []string) (map[string]string, error) {
	files, ok := g.files[commit]
	if !ok {
		return nil, fmt.Errorf("%w: commit %s", errMissing, commit)
	}
	out := map[string]string{}
	for p, blob := range files {
		for _, pat := range patterns {
			if ok, _ := path.Match(pat, p); ok {
				out[p] = blob
			}
		}
	}
	return out, nil
}

type files = map[string]string

// history is main: c1 (adds tau.yaml) - c2 (no tau change) - c3 (changes
// tau.yaml) - c4 (changes tau/ray.yaml) - c5 (changes README only), and a
// rewritten line x3 - x4 from c2 as after a force-push.
func history() *graph {
	return newGraph().
		commit("c1", nil, files{"tau.yaml": "t1"}).
		commit("c2", []string{"c1"}, files{"tau.yaml": "t1"}).
		commit("c3", []string{"c2"}, files{"tau.yaml": "t3"}).
		commit("c4", []string{"c3"}, files{"tau.yaml": "t3", "tau/ray.yaml": "r4"}).
		commit("c5", []string{"c4"}, files{"tau.yaml": "t3", "tau/ray.yaml": "r4"}).
		commit("x3", []string{"c2"}, files{"tau.yaml": "tx"}).
		commit("x4", []string{"x3"}, files{"tau.yaml": "tx"}).
		commit("both", []string{"c2"}, files{"tau.yaml": "tb", "tau/ray.yaml": "rb"}).
		commit("gone", []string{"c2"}, files{}).
		commit("f1", []string{"c5"}, files{"tau.yaml": "t3", "tau/ray.yaml": "r4", "tau/eval.yaml": "e1"}).
		commit("m1", []string{"c5", "f1"}, files{"tau.yaml": "t3", "tau/ray.yaml": "r4", "tau/eval.yaml": "e1"}).
		tag("tagobj1", "c3", "").
		tag("tagobj2", "c4", "annotated run").
		tag("run1", "c3", "target: ray\noverrides: {compute.gpus: \"2\"}\nrequester: carol@example.com\n").
		tag("run2", "c3", "target: ray\n").
		tag("bad", "c3", "target: ../../etc\n").
		tag("dotted", "c3", "target: exp.v2\n").
		commit("u1", []string{"c5"}, files{"tau.yaml": "t3", "tau/ray.yaml": "r4", "tau/Exp_V2.yaml": "u1"})
}

func TestDetect(t *testing.T) {
	main := Triggers{Branches: []string{"main"}}
	tests := map[string]struct {
		prev, cur RefSet
		triggers  Triggers
		graph     *graph
		want      Detection
	}{
		"an unchanged repository requests nothing": {
			prev: RefSet{"refs/tags/run/a": {SHA: "c3"}, "refs/heads/main": {SHA: "c5"}},
			cur:  RefSet{"refs/tags/run/a": {SHA: "c3"}, "refs/heads/main": {SHA: "c5"}},
		},
		"a new lightweight run tag runs the default target": {
			cur: RefSet{"refs/tags/run/a": {SHA: "c3"}},
			want: Detection{Events: []Event{
				{Kind: KindRunTag, Ref: "refs/tags/run/a", Commit: "c3", Target: "default"},
			}},
		},
		"a tag outside the run patterns is ignored": {
			cur: RefSet{"refs/tags/v1.0": {SHA: "c3"}, "refs/tags/run/nested/deep": {SHA: "c3"}},
		},
		"custom run patterns": {
			triggers: Triggers{RunTags: []string{"exp-*"}},
			cur:      RefSet{"refs/tags/exp-1": {SHA: "c3"}, "refs/tags/run/a": {SHA: "c3"}},
			want: Detection{Events: []Event{
				{Kind: KindRunTag, Ref: "refs/tags/exp-1", Commit: "c3", Target: "default"},
			}},
		},
		"an annotated run tag carries its tagger; a free-text message is just a message": {
			cur: RefSet{"refs/tags/run/b": {SHA: "tagobj2", Peeled: "c4"}},
			want: Detection{Events: []Event{
				{Kind: KindRunTag, Ref: "refs/tags/run/b", Commit: "c4", Tag: "tagobj2", Target: "default",
					Tagger: "Alice <alice@example.com>", Requester: "alice@example.com"},
			}},
		},
		"a moved run tag cancels the run of its old commit and runs the new one": {
			prev: RefSet{"refs/tags/run/a": {SHA: "c3"}},
			cur:  RefSet{"refs/tags/run/a": {SHA: "c4"}},
			want: Detection{Events: []Event{
				{Kind: KindCancel, Ref: "refs/tags/run/a", Commit: "c3"},
				{Kind: KindRunTag, Ref: "refs/tags/run/a", Commit: "c4", Target: "default"},
			}},
		},
		"a deleted run tag cancels its run": {
			prev: RefSet{"refs/tags/run/b": {SHA: "tagobj2", Peeled: "c4"}},
			want: Detection{Events: []Event{
				{Kind: KindCancel, Ref: "refs/tags/run/b", Commit: "c4", Tag: "tagobj2"},
			}},
		},
		"a run ref runs the target, overrides and requester of its message": {
			cur: RefSet{"refs/tau/runs/r1": {SHA: "run1", Peeled: "c3"}},
			want: Detection{Events: []Event{
				{Kind: KindRunRef, Ref: "refs/tau/runs/r1", Commit: "c3", Tag: "run1", Target: "ray",
					Tagger: "Alice <alice@example.com>", Requester: "carol@example.com",
					Overrides: map[string]string{"compute.gpus": "2"}},
			}},
		},
		"two run refs on one commit and target are two runs, never one": {
			cur: RefSet{"refs/tau/runs/r1": {SHA: "run1", Peeled: "c3"}, "refs/tau/runs/r2": {SHA: "run2", Peeled: "c3"}},
			want: Detection{Events: []Event{
				{Kind: KindRunRef, Ref: "refs/tau/runs/r1", Commit: "c3", Tag: "run1", Target: "ray",
					Tagger: "Alice <alice@example.com>", Requester: "carol@example.com",
					Overrides: map[string]string{"compute.gpus": "2"}},
				{Kind: KindRunRef, Ref: "refs/tau/runs/r2", Commit: "c3", Tag: "run2", Target: "ray",
					Tagger: "Alice <alice@example.com>", Requester: "alice@example.com"},
			}},
		},
		"a run ref pointing straight at a commit runs the default target": {
			cur: RefSet{"refs/tau/runs/plain": {SHA: "c3"}},
			want: Detection{Events: []Event{
				{Kind: KindRunRef, Ref: "refs/tau/runs/plain", Commit: "c3", Target: "default"},
			}},
		},
		"a run ref whose message is not a run request is a problem, and runs nothing": {
			cur: RefSet{"refs/tau/runs/bad": {SHA: "bad", Peeled: "c3"}},
			want: Detection{Problems: []Problem{
				{Ref: "refs/tau/runs/bad", SHA: "bad", Commit: "c3", Err: ErrInvalidRunRequest},
			}},
		},
		"a run ref whose target is not a label (exp.v2) is a problem, and runs nothing": {
			cur: RefSet{"refs/tau/runs/dotted": {SHA: "dotted", Peeled: "c3"}},
			want: Detection{Problems: []Problem{
				{Ref: "refs/tau/runs/dotted", SHA: "dotted", Commit: "c3", Err: ErrInvalidRunRequest},
			}},
		},
		"a run tag asking for a bad target is a problem, not a run of the default": {
			cur: RefSet{"refs/tags/run/dotted": {SHA: "dotted", Peeled: "c3"}},
			want: Detection{Problems: []Problem{
				{Ref: "refs/tags/run/dotted", SHA: "dotted", Commit: "c3", Err: ErrInvalidRunRequest},
			}},
		},
		"a run tag with a plain message runs the default target": {
			cur: RefSet{"refs/tags/run/plain": {SHA: "tagobj2", Peeled: "c4"}},
			want: Detection{Events: []Event{
				{Kind: KindRunTag, Ref: "refs/tags/run/plain", Commit: "c4", Tag: "tagobj2", Target: "default",
					Tagger: "Alice <alice@example.com>", Requester: "alice@example.com"},
			}},
		},
		"a branch commit adding tau/Exp_V2.yaml is a problem naming the file": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c5"}},
			cur:      RefSet{"refs/heads/main": {SHA: "u1"}},
			want: Detection{Problems: []Problem{
				{Ref: "refs/heads/main", SHA: "u1", Commit: "u1", Err: cmpopts.AnyError},
			}},
		},
		"a deleted run ref cancels its run": {
			prev: RefSet{"refs/tau/runs/r1": {SHA: "run1", Peeled: "c3"}},
			want: Detection{Events: []Event{
				{Kind: KindCancel, Ref: "refs/tau/runs/r1", Commit: "c3", Tag: "run1"},
			}},
		},
		"a fast-forward fires once, for the newest commit that changed a tau file": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c1"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c5"}},
			want: Detection{Events: []Event{
				{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: "c4", Target: "ray", Requester: "bob@example.com"},
			}},
		},
		"a fast-forward that changes no tau file fires nothing": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c4"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c5"}},
		},
		"a commit changing two tau files runs both targets": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c2"}},
			cur:      RefSet{"refs/heads/main": {SHA: "both"}},
			want: Detection{Events: []Event{
				{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: "both", Target: "default", Requester: "bob@example.com"},
				{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: "both", Target: "ray", Requester: "bob@example.com"},
			}},
		},
		"a force-push counts only the commits the old head did not have": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c5"}},
			cur:      RefSet{"refs/heads/main": {SHA: "x4"}},
			want: Detection{Events: []Event{
				{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: "x3", Target: "default", Requester: "bob@example.com"},
			}},
		},
		"a force-push back to an older commit fires nothing": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c5"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c3"}},
		},
		"a commit that only deletes tau files runs nothing": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c2"}},
			cur:      RefSet{"refs/heads/main": {SHA: "gone"}},
		},
		"a merge that brings a new target fires for the merge": {
			triggers: main,
			prev:     RefSet{"refs/heads/main": {SHA: "c5"}},
			cur:      RefSet{"refs/heads/main": {SHA: "m1"}},
			want: Detection{Events: []Event{
				{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: "m1", Target: "eval", Requester: "bob@example.com"},
			}},
		},
		"a new branch forked from a watched one fires nothing for the shared history": {
			triggers: Triggers{Branches: []string{"main", "exp/*"}},
			prev:     RefSet{"refs/heads/main": {SHA: "c5"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c5"}, "refs/heads/exp/a": {SHA: "c5"}},
		},
		"a new branch with its own tau change fires": {
			triggers: Triggers{Branches: []string{"main", "exp/*"}},
			prev:     RefSet{"refs/heads/main": {SHA: "c5"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c5"}, "refs/heads/exp/a": {SHA: "f1"}},
			want: Detection{Events: []Event{
				{Kind: KindBranchChange, Ref: "refs/heads/exp/a", Commit: "f1", Target: "eval", Requester: "bob@example.com"},
			}},
		},
		"an unwatched branch is ignored": {
			triggers: main,
			cur:      RefSet{"refs/heads/dev": {SHA: "c5"}},
		},
		"a commit whose parent is beyond the fetched history is not guessed at": {
			triggers: main,
			graph:    history().forget("c3"),
			prev:     RefSet{"refs/heads/main": {SHA: "c1"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c5"}},
		},
		"a walk bounded by MaxWalk stops before an older tau change": {
			triggers: Triggers{Branches: []string{"main"}, MaxWalk: 1},
			prev:     RefSet{"refs/heads/main": {SHA: "c1"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c5"}},
		},
		"an old head missing from the graph: the newest change within the bound, marked truncated": {
			triggers: Triggers{Branches: []string{"main"}, MaxWalk: 3},
			graph:    history().forget("c1"),
			prev:     RefSet{"refs/heads/main": {SHA: "c1"}},
			cur:      RefSet{"refs/heads/main": {SHA: "c5"}},
			want: Detection{Events: []Event{
				{Kind: KindBranchChange, Ref: "refs/heads/main", Commit: "c4", Target: "ray", Requester: "bob@example.com", Truncated: true},
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := tc.graph
			if g == nil {
				g = history()
			}
			got, err := Detect(tc.prev, tc.cur, tc.triggers, g)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("detection (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetectNeedsTheObjectsFetched(t *testing.T) {
	_, err := Detect(nil, RefSet{"refs/tau/runs/x": {SHA: "nothere", Peeled: "c3"}}, Triggers{}, history())
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestDetectIsStable(t *testing.T) {
	cur := RefSet{}
	for i := range 50 {
		cur[fmt.Sprintf("refs/tau/runs/r%02d", i)] = Ref{SHA: "run2", Peeled: "c3"}
		cur[fmt.Sprintf("refs/tags/run/t%02d", i)] = Ref{SHA: "c4"}
	}
	first, err := Detect(nil, cur, Triggers{}, history())
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) != 100 {
		t.Fatalf("%d events for 100 new run refs and tags", len(first.Events))
	}
	for range 5 {
		again, _ := Detect(nil, cur, Triggers{}, history())
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("a second detection differs (-first +again):\n%s", diff)
		}
	}
}

func TestBaselineKeepsRunRefsNew(t *testing.T) {
	cur := RefSet{
		"refs/tags/run/a":  {SHA: "c3"},
		"refs/tau/runs/r1": {SHA: "run1", Peeled: "c3"},
		"refs/heads/main":  {SHA: "c5"},
		"refs/heads/dev":   {SHA: "c5"},
	}
	tr := Triggers{Branches: []string{"main"}}
	want := RefSet{"refs/tags/run/a": {SHA: "c3"}, "refs/heads/main": {SHA: "c5"}}
	if diff := cmp.Diff(want, tr.Baseline(cur)); diff != "" {
		t.Errorf("baseline (-want +got):\n%s", diff)
	}
	d, err := Detect(tr.Baseline(cur), tr.Watched(cur), tr, history())
	if err != nil || len(d.Events) != 1 || d.Events[0].Ref != "refs/tau/runs/r1" {
		t.Errorf("first observation = %+v, %v; want only the run ref", d, err)
	}
}

func TestABranchTauFileThatIsNoTargetNameIsNamedInTheProblem(t *testing.T) {
	d, err := Detect(RefSet{"refs/heads/main": {SHA: "c5"}}, RefSet{"refs/heads/main": {SHA: "u1"}}, Triggers{Branches: []string{"main"}}, history())
	if err != nil || len(d.Problems) != 1 {
		t.Fatalf("detection = %+v, %v; want one problem", d, err)
	}
	want := `tau/Exp_V2.yaml: "Exp_V2" is not a target name: want lowercase letters, digits and '-', starting and ending with a letter or digit (rename the file tau/exp-v2.yaml?)`
	if got := d.Problems[0].Err.Error(); got != want {
		t.Errorf("problem = %q, want %q", got, want)
	}
}
