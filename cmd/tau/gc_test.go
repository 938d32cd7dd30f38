package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gcRun(ref string, phase taugridv1.RunPhase, ended time.Time) taugridv1.TauRun {
	r := taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "run-" + strings.TrimPrefix(ref, RunRefPrefix)},
		Spec: taugridv1.TauRunSpec{Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: ref}}}
	r.Status.Phase = phase
	if !ended.IsZero() {
		r.Status.Phases = []taugridv1.PhaseTransition{{Phase: phase, Time: metav1.NewTime(ended)}}
	}
	return r
}

func TestGCDeletesOnlyRefsWhoseRunsAllEndedBeforeTheCutoff(t *testing.T) {
	now := time.Date(2027, 1, 15, 12, 0, 0, 0, time.UTC)
	setClock(t, now)
	cutoff := now.Add(-720 * time.Hour)
	old, recent := cutoff.Add(-time.Hour), cutoff.Add(time.Hour)
	ref := func(id string) string { return RunRefPrefix + id }
	tests := map[string]struct {
		runs []taugridv1.TauRun
		want gcDecision
	}{
		"a run that succeeded long ago goes": {
			runs: []taugridv1.TauRun{gcRun(ref("r"), taugridv1.PhaseSucceeded, old)},
			want: gcDecision{Ref: ref("r"), Delete: true, Why: "succeeded 30d ago"},
		},
		"a run that ended recently stays": {
			runs: []taugridv1.TauRun{gcRun(ref("r"), taugridv1.PhaseFailed, recent)},
			want: gcDecision{Ref: ref("r"), Why: "ended 29d ago"},
		},
		"a run still going stays, however old": {
			runs: []taugridv1.TauRun{gcRun(ref("r"), taugridv1.PhaseRunning, old)},
			want: gcDecision{Ref: ref("r"), Why: "run run-r is Running"},
		},
		"a moved ref stays while its newer run goes": {
			runs: []taugridv1.TauRun{gcRun(ref("r"), taugridv1.PhaseSucceeded, old), gcRun(ref("r"), taugridv1.PhaseQueued, time.Time{})},
			want: gcDecision{Ref: ref("r"), Why: "run run-r is Queued"},
		},
		"a ref no run answers to yet stays": {
			want: gcDecision{Ref: ref("r"), Why: "no run answers to it yet"},
		},
		"an ended run with no recorded end stays": {
			runs: []taugridv1.TauRun{gcRun(ref("r"), taugridv1.PhaseCancelled, time.Time{})},
			want: gcDecision{Ref: ref("r"), Why: "run run-r ended at a time it does not record"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := planGC(map[string]string{ref("r"): "c1"}, tc.runs, cutoff)
			if diff := cmp.Diff([]gcDecision{tc.want}, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// On a real git server and the controller's real runs API: the dry run
// deletes nothing; gc then deletes the ended run's ref and keeps the
// running run's and the ref no run answers to.
func TestGCDeletesTheEndedRunsRefFromTheRemoteAndKeepsTheRunningOne(t *testing.T) {
	fx := newAPIFixture(t)
	r := newResearcher(t)
	setClock(t, time.Date(2027, 1, 15, 12, 0, 0, 0, time.UTC)) // the fixture's run failed 2026-11-30
	ended := strings.TrimPrefix(fx.run.Spec.Trigger.Ref, RunRefPrefix)
	running := gcRun(RunRefPrefix+"r-20261201-090000-aaaaaa", taugridv1.PhaseRunning, time.Time{})
	running.Namespace, running.Spec.Repository, running.Spec.Commit, running.Spec.Target = "team-a", "research", strings.Repeat("d", 40), "default"
	if err := fx.c.Create(context.Background(), &running); err != nil {
		t.Fatal(err)
	}
	running.Status.Phase = taugridv1.PhaseRunning
	if err := fx.c.Status().Update(context.Background(), &running); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ended, "r-20261201-090000-aaaaaa", "r-20261202-090000-bbbbbb"} {
		r.git("-C", r.work, "push", "--quiet", "origin", "HEAD:"+RunRefPrefix+id)
	}
	args := []string{"gc", "--older-than", "720h", "--dir", r.work, "--api-url", fx.url, "-n", "team-a"}

	out, stderr, err := tau(t, append(args, "--dry-run")...)
	if err != nil {
		t.Fatalf("tau gc --dry-run: %v\n%s", err, stderr)
	}
	want := "would delete refs/tau/runs/" + ended + ": failed 46d ago\n" +
		"keep refs/tau/runs/r-20261201-090000-aaaaaa: run " + running.Name + " is Running\n" +
		"keep refs/tau/runs/r-20261202-090000-bbbbbb: no run answers to it yet\n" +
		"1 of 3 run refs would be deleted (dry run: nothing deleted).\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if n := len(r.remoteRunRefs()); n != 3 {
		t.Fatalf("the dry run left %d of 3 run refs", n)
	}

	out, stderr, err = tau(t, args...)
	if err != nil {
		t.Fatalf("tau gc: %v\n%s", err, stderr)
	}
	if !strings.HasSuffix(out, "1 of 3 run refs deleted from origin.\n") {
		t.Errorf("gc output = %q", out)
	}
	left := r.remoteRunRefs()
	if _, ok := left[RunRefPrefix+ended]; ok || len(left) != 2 {
		t.Errorf("run refs left = %v, want the running run's and the unanswered one", left)
	}
	if _, _, err := tau(t, "gc", "--dir", r.work); err == nil || !strings.Contains(err.Error(), "--older-than") {
		t.Errorf("gc without --older-than: %v", err)
	}
}
