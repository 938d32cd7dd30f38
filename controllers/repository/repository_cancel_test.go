package repository

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
)

// TestADeletedRunRefCancelsItsRun: a run ref or run tag that goes (or
// moves away) marks its unfinished run cancelled, once; other runs and
// finished ones are left alone.
func TestADeletedRunRefCancelsItsRun(t *testing.T) {
	x := runs.RunName("research", "refs/tau/runs/x", c1, "default")
	y := runs.RunName("research", "refs/tau/runs/y", c1, "default")
	tag := runs.RunName("research", "refs/tags/run/lr", c1, "default")
	xMoved := runs.RunName("research", "refs/tau/runs/x", c2, "default")
	cases := map[string]struct {
		meanwhile func(t *testing.T, w *repoWorld) // between the run's start and the change
		change    func(g *fakeGit)
		cancelled map[string]bool // every run, by name: spec.cancel
		events    []string
	}{
		"a deleted run ref": {
			change:    func(g *fakeGit) { delete(g.refs, "refs/tau/runs/x") },
			cancelled: map[string]bool{x: true, y: false, tag: false},
			events:    []string{"Normal RunCancelled"},
		},
		"a deleted run tag": {
			change:    func(g *fakeGit) { delete(g.refs, "refs/tags/run/lr") },
			cancelled: map[string]bool{x: false, y: false, tag: true},
			events:    []string{"Normal RunCancelled"},
		},
		"a run ref moved to another commit: the old run stops, the new one starts": {
			change:    func(g *fakeGit) { g.commit(c2, c1, tauV2); g.refs["refs/tau/runs/x"] = at(c2) },
			cancelled: map[string]bool{x: true, xMoved: false, y: false, tag: false},
			events:    []string{"Normal RunCancelled", "Normal RunRequested"},
		},
		"a deleted run ref whose run finished: nothing to stop": {
			meanwhile: func(t *testing.T, w *repoWorld) { setPhase(t, w, x, taugridv1.PhaseSucceeded) },
			change:    func(g *fakeGit) { delete(g.refs, "refs/tau/runs/x") },
			cancelled: map[string]bool{x: false, y: false, tag: false},
		},
		"a deleted run ref whose run was cancelled already: not patched again": {
			meanwhile: func(t *testing.T, w *repoWorld) { setCancel(t, w, x) },
			change:    func(g *fakeGit) { delete(g.refs, "refs/tau/runs/x") },
			cancelled: map[string]bool{x: true, y: false, tag: false},
		},
		"a deleted run ref whose run was deleted: nothing to stop": {
			meanwhile: func(t *testing.T, w *repoWorld) { deleteRun(t, w, x) },
			change:    func(g *fakeGit) { delete(g.refs, "refs/tau/runs/x") },
			cancelled: map[string]bool{y: false, tag: false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepoWorld(t, nil, research().Obj())
			registered(w.git)
			w.mustReconcile(t)
			w.git.refs["refs/tau/runs/x"] = at(c1)
			w.git.refs["refs/tau/runs/y"] = at(c1)
			w.git.refs["refs/tags/run/lr"] = at(c1)
			w.mustReconcile(t)
			w.drain()
			if tc.meanwhile != nil {
				tc.meanwhile(t, w)
			}
			tc.change(w.git)
			w.mustReconcile(t)
			w.mustReconcile(t) // the next poll has nothing more to do
			got := map[string]bool{}
			for _, r := range w.runs(t) {
				got[r.Name] = r.Spec.Cancel
			}
			if diff := cmp.Diff(tc.cancelled, got); diff != "" {
				t.Errorf("spec.cancel by run (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.events, reasons(w.drain())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func setPhase(t *testing.T, w *repoWorld, name string, p taugridv1.RunPhase) {
	t.Helper()
	run := runNamed(t, w, name)
	run.Status.Phase = p
	if err := w.c.Status().Update(context.Background(), run); err != nil {
		t.Fatal(err)
	}
}

func setCancel(t *testing.T, w *repoWorld, name string) {
	t.Helper()
	run := runNamed(t, w, name)
	run.Spec.Cancel = true
	if err := w.c.Update(context.Background(), run); err != nil {
		t.Fatal(err)
	}
}

func deleteRun(t *testing.T, w *repoWorld, name string) {
	t.Helper()
	if err := w.c.Delete(context.Background(), runNamed(t, w, name)); err != nil {
		t.Fatal(err)
	}
}

func runNamed(t *testing.T, w *repoWorld, name string) *taugridv1.TauRun {
	t.Helper()
	for _, r := range w.runs(t) {
		if r.Name == name {
			return &r
		}
	}
	t.Fatalf("no run %s", name)
	return nil
}
