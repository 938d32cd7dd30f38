package forge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// aRun builds a run of target default in phase p.
func aRun(p taugridv1.RunPhase, opts ...func(*taugridv1.TauRun)) *taugridv1.TauRun {
	r := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "research-first-1a2b3c", Namespace: "team-a"},
		Spec:   taugridv1.TauRunSpec{Repository: "research", Commit: sha, Target: "default"},
		Status: taugridv1.TauRunStatus{Phase: p, EvidenceURL: "https://tau.example/runs/research-first-1a2b3c"}}
	for _, o := range opts {
		o(r)
	}
	return r
}

func inQueue(queue, reason string) func(*taugridv1.TauRun) {
	return func(r *taugridv1.TauRun) {
		r.Status.Workload = &taugridv1.WorkloadStatus{Kind: "Job", Name: r.Name + "-1", Queue: queue, Reason: reason}
	}
}

// withPods sets the run's PodsRunning condition, False with reason.
func withPods(reason string) func(*taugridv1.TauRun) {
	return func(r *taugridv1.TauRun) {
		r.Status.Conditions = append(r.Status.Conditions, metav1.Condition{Type: taugridv1.ConditionPodsRunning, Status: metav1.ConditionFalse, Reason: reason})
	}
}

func withMessage(m string) func(*taugridv1.TauRun) {
	return func(r *taugridv1.TauRun) { r.Status.Message = m }
}

func TestDesiredStatusSpeaksTheResearchersLanguage(t *testing.T) {
	cases := map[string]struct {
		run     *taugridv1.TauRun
		state   forge.State
		desc    string
		generic string // the phase's line before the run explains itself
	}{
		"a new run is pending while it is prepared": {
			run: aRun(""), state: forge.StatePending, desc: "accepted: preparing the run"},
		"a pending run reading its tau file is still pending": {
			run: aRun(taugridv1.PhasePending, withMessage("reading tau.yaml")), state: forge.StatePending, desc: "accepted: preparing the run"},
		"a run Kueue has not looked at yet shows its queue": {
			run: aRun(taugridv1.PhaseQueued, inQueue("runs", "")), state: forge.StatePending, desc: "queued in runs", generic: "queued in runs"},
		"a waiting run shows the run reconciler's one-line explanation": {
			run: aRun(taugridv1.PhaseQueued, inQueue("runs", "the long explanation"),
				withMessage("queued #2 of 3 in team-a: needs 8 more nvidia.com/gpu (h200); team-a uses 16/8 (8 borrowed)")),
			state: forge.StatePending, desc: "queued #2 of 3 in team-a: needs 8 more nvidia.com/gpu (h200); team-a uses 16/8 (8 borrowed)",
			generic: "queued in runs"},
		"just submitted, it shows its queue": {
			run: aRun(taugridv1.PhaseQueued, inQueue("runs", ""), withMessage("submitted to queue runs")), state: forge.StatePending, desc: "queued in runs", generic: "queued in runs"},
		"an admitted run is starting": {
			run: aRun(taugridv1.PhaseAdmitted, inQueue("runs", "")), state: forge.StateRunning, desc: "admitted in runs: starting",
			generic: "admitted in runs: starting"},
		"an admitted run whose pods are on their way shows the generic line, not each count": {
			run: aRun(taugridv1.PhaseAdmitted, inQueue("runs", ""), withMessage("admitted, starting: 1 of 2 pods running (1 starting containers)"),
				withPods(taugridv1.ReasonPodsStarting)),
			state: forge.StateRunning, desc: "admitted in runs: starting", generic: "admitted in runs: starting"},
		"an admitted run whose pod fits no node says so and is not running": {
			run: aRun(taugridv1.PhaseAdmitted, inQueue("runs", ""), withPods(taugridv1.ReasonPodsNotStarting),
				withMessage("admitted, not starting: no node fits a Ray worker: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu; pod p-0 needs 8 nvidia.com/gpu")),
			state: forge.StatePending, desc: "admitted, not starting: no node fits a Ray worker: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu; pod p-0 needs 8 nvidia.com/gpu",
			generic: "admitted in runs: starting"},
		"a running run is running": {
			run: aRun(taugridv1.PhaseRunning, inQueue("runs", "")), state: forge.StateRunning, desc: "running"},
		"a succeeded run succeeded": {
			run: aRun(taugridv1.PhaseSucceeded, withMessage("Job completed")), state: forge.StateSuccess, desc: "succeeded"},
		"an invalid tau file fails with its first line": {
			run:   aRun(taugridv1.PhaseFailed, withMessage("tau.yaml:12:5: compute.gpus: must be at most 8\nmore detail")),
			state: forge.StateFailure, desc: "failed: tau.yaml:12:5: compute.gpus: must be at most 8"},
		"a cancelled run is an error": {
			run:   aRun(taugridv1.PhaseCancelled, withMessage("cancelled: its run ref or tag was deleted")),
			state: forge.StateError, desc: "cancelled: its run ref or tag was deleted"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := forge.Status{SHA: sha, Context: "tau/default research-first-1a2b3c", State: tc.state, Description: tc.desc,
				TargetURL: "https://tau.example/runs/research-first-1a2b3c", Phase: string(tc.run.Status.Phase), Generic: tc.generic}
			got := forge.Desired(tc.run)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(forge.Status{}, "Summary")); diff != "" {
				t.Errorf("Desired (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(got.Summary, tc.desc+"\n\n**Run** `research-first-1a2b3c`") {
				t.Errorf("check run summary does not open with the description and the run:\n%s", got.Summary)
			}
		})
	}
}

func TestCheckRunSummaryTellsWhatRanWhereAndWhen(t *testing.T) {
	run := aRun(taugridv1.PhaseQueued)
	run.Spec.Trigger = taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: "refs/tau/runs/r-1", Requester: "alice@example.com"}
	at := metav1.Date(2026, 11, 30, 3, 4, 5, 0, time.UTC)
	run.Status.Phases = []taugridv1.PhaseTransition{{Phase: taugridv1.PhasePending, Time: at}, {Phase: taugridv1.PhaseQueued, Time: at}}
	run.Status.Workload = &taugridv1.WorkloadStatus{Kind: "Job", Name: "research-first-1a2b3c-1", Queue: "runs",
		Reason: "queued #1 of 1 in team-a: needs 1 more nvidia.com/gpu (h200).\nKueue: couldn't assign flavors"}
	run.Status.Attempts = []taugridv1.Attempt{{Number: 1}}
	run.Status.TauFile, run.Status.ConfigDigest, run.Status.PolicyCommit, run.Status.PolicyDigest = "tau.yaml", "sha256:c0ffee", strings.Repeat("9", 40), "sha256:beef"
	got := forge.Desired(run).Summary
	for _, want := range []string{
		"RunRef `refs/tau/runs/r-1` by alice@example.com",
		"| Queued | 2026-11-30 03:04:05 |",
		"**Queue** `runs`; **workload** Job `research-first-1a2b3c-1`",
		"**Why it waits**\n\n```\nqueued #1 of 1 in team-a: needs 1 more nvidia.com/gpu (h200).\nKueue: couldn't assign flavors\n```",
		"**Attempts** 1",
		"**Config** `tau.yaml` `sha256:c0ffee`; **policy** at `999999999999` `sha256:beef`",
		"[Evidence](https://tau.example/runs/research-first-1a2b3c)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestDesiredDescriptionsFitTheForgeLimit(t *testing.T) {
	run := aRun(taugridv1.PhaseFailed, withMessage(strings.Repeat("ü", 500)))
	if got := forge.Desired(run).Description; len([]rune(got)) > forge.MaxDescription {
		t.Errorf("description has %d characters, want at most %d", len([]rune(got)), forge.MaxDescription)
	}
}
