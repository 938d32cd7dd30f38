package reconciler

import (
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/reconciler/forge"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProgressPostsWaitAMinuteButFinalOnesNever(t *testing.T) {
	now := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	posted := func(ago time.Duration) *taugridv1.ForgeStatus {
		return &taugridv1.ForgeStatus{Context: "tau/default r", State: "pending", Description: "queued in runs",
			PostedAt: metav1.NewTime(now.Add(-ago))}
	}
	running := forge.Status{Context: "tau/default r", State: forge.StateRunning, Description: "running"}
	success := forge.Status{Context: "tau/default r", State: forge.StateSuccess, Description: "succeeded"}
	cases := map[string]struct {
		last *taugridv1.ForgeStatus
		want forge.Status
		wait time.Duration
	}{
		"the first post goes at once":              {last: nil, want: running, wait: 0},
		"progress 20s after the last waits 40s":    {last: posted(20 * time.Second), want: running, wait: 40 * time.Second},
		"progress a minute after the last goes":    {last: posted(time.Minute), want: running, wait: 0},
		"a final state 1s after the last goes now": {last: posted(time.Second), want: success, wait: 0},
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
