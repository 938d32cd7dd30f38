package forgestatus

import (
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRefreshesWithinAPhaseWaitAMinuteButNewPhasesNever(t *testing.T) {
	now := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	posted := func(phase taugridv1.RunPhase, desc string, ago time.Duration) *taugridv1.ForgeStatus {
		return &taugridv1.ForgeStatus{Context: "tau/default r", State: "pending", Description: desc, Phase: phase,
			PostedAt: metav1.NewTime(now.Add(-ago))}
	}
	queued := func(desc string) forge.Status {
		return forge.Status{Context: "tau/default r", State: forge.StatePending, Description: desc,
			Phase: string(taugridv1.PhaseQueued), Generic: "queued in runs"}
	}
	explained := posted(taugridv1.PhaseQueued, "queued #2 of 2 in runs", 20*time.Second)
	cases := map[string]struct {
		last *taugridv1.ForgeStatus
		want forge.Status
		wait time.Duration
	}{
		"the first post goes at once": {last: nil, want: queued("queued in runs"), wait: 0},
		"queued 1s after accepted goes at once": {last: posted(taugridv1.PhasePending, "accepted: preparing the run", time.Second),
			want: queued("queued in runs"), wait: 0},
		"the first explanation replaces the generic line at once": {last: posted(taugridv1.PhaseQueued, "queued in runs", time.Second),
			want: queued("queued #2 of 2 in runs"), wait: 0},
		"a new queue position 20s after the last waits 40s": {last: explained, want: queued("queued #1 of 2 in runs"), wait: 40 * time.Second},
		"a refresh a minute after the last goes":            {last: posted(taugridv1.PhaseQueued, "queued #2 of 2 in runs", time.Minute), want: queued("queued #1 of 2 in runs"), wait: 0},
		"admitted 1s after queued goes at once": {last: explained,
			want: forge.Status{Context: "tau/default r", State: forge.StateRunning, Description: "admitted in runs: starting", Phase: string(taugridv1.PhaseAdmitted)}, wait: 0},
		"running 1s after admitted goes at once": {last: posted(taugridv1.PhaseAdmitted, "admitted in runs: starting", time.Second),
			want: forge.Status{Context: "tau/default r", State: forge.StateRunning, Description: "running", Phase: string(taugridv1.PhaseRunning)}, wait: 0},
		"a final state 1s after the last goes now": {last: explained,
			want: forge.Status{Context: "tau/default r", State: forge.StateSuccess, Description: "succeeded", Phase: string(taugridv1.PhaseSucceeded)}, wait: 0},
		"a record from before phases were recorded goes at once": {last: posted("", "queued #2 of 2 in runs", time.Second), want: queued("queued #1 of 2 in runs"), wait: 0},
	}
	for name, tc := range cases {
		if got := progressWait(tc.last, tc.want, now); got != tc.wait {
			t.Errorf("%s: wait %v, want %v", name, got, tc.wait)
		}
	}
}

func TestAStatusAlreadyPostedIsNotPostedAgain(t *testing.T) {
	last := &taugridv1.ForgeStatus{Context: "tau/default r", State: "running", Description: "running", TargetURL: "https://e/r"}
	same := forge.Status{Context: "tau/default r", State: forge.StateRunning, Description: "running", TargetURL: "https://e/r"}
	if !alreadyPosted(last, same) {
		t.Error("the same status counts as new")
	}
	for name, s := range map[string]forge.Status{
		"another state":       {Context: same.Context, State: forge.StateSuccess, Description: same.Description, TargetURL: same.TargetURL},
		"another description": {Context: same.Context, State: same.State, Description: "admitted", TargetURL: same.TargetURL},
		"an evidence link":    {Context: same.Context, State: same.State, Description: same.Description, TargetURL: "https://e/r2"},
	} {
		if alreadyPosted(last, s) {
			t.Errorf("%s counts as already posted", name)
		}
	}
	if alreadyPosted(nil, same) {
		t.Error("nothing posted counts as posted")
	}
}
