package shared

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestFinishTurnsHowAReconcileEndedIntoItsResult: done and stalled
// reconciles keep their result and count as handled; a wait requeues
// after its duration without an error's backoff; anything else is
// returned for the rate limiter.
func TestFinishTurnsHowAReconcileEndedIntoItsResult(t *testing.T) {
	interval := reconcile.Result{RequeueAfter: time.Minute}
	transient := errors.New("etcd is slow")
	cases := map[string]struct {
		err     error
		handled bool
		want    reconcile.Result
		wantErr error
	}{
		"done":                        {nil, true, interval, nil},
		"stalled: a human must act":   {Terminal(errors.New("no Secret")), true, interval, nil},
		"waiting for the policy":      {Waiting(10*time.Second, errors.New("no policy yet")), false, reconcile.Result{RequeueAfter: 10 * time.Second}, nil},
		"transient: backoff":          {transient, false, reconcile.Result{}, transient},
		"a wrapped stall is a stall":  {errors.Join(Terminal(errors.New("bad")), nil), true, interval, nil},
		"Terminal(nil) is no failure": {Terminal(nil), true, interval, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Handled(tc.err); got != tc.handled {
				t.Errorf("Handled = %v, want %v", got, tc.handled)
			}
			res, err := Finish(interval, tc.err)
			if res != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("Finish = %+v, %v; want %+v, %v", res, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestEndedAttemptsAndSealing(t *testing.T) {
	end := metav1.NewTime(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	run := &taugridv1.TauRun{Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseSucceeded,
		Attempts: []taugridv1.Attempt{{Number: 1, EndTime: &end}, {Number: 2}}}}
	if diff := cmp.Diff([]int{1, 2}, EndedAttempts(run)); diff != "" {
		t.Errorf("ended attempts of a run over (-want +got):\n%s", diff)
	}
	run.Status.Phase = taugridv1.PhaseRunning
	if diff := cmp.Diff([]int{1}, EndedAttempts(run)); diff != "" {
		t.Errorf("ended attempts of a running run (-want +got):\n%s", diff)
	}
	if Sealing(run) {
		t.Error("a run with no evidence condition is sealing")
	}
	SetCondition(&run.Status.Conditions, 1, end.Time, ConditionEvidence, metav1.ConditionFalse, ReasonSealing, "sealing attempt 1")
	if !Sealing(run) {
		t.Error("a run marked Sealing is not sealing")
	}
}

// TestARetryAvoidsTheNodesOfFaultsAndResumes: the attempt after a GPU
// fault or a lost node avoids those nodes and resumes from its checkpoint;
// other failures' nodes stay usable.
func TestARetryAvoidsTheNodesOfFaultsAndResumes(t *testing.T) {
	run := &taugridv1.TauRun{Spec: taugridv1.TauRunSpec{Repository: "research", Commit: "c1", Target: "default"},
		Status: taugridv1.TauRunStatus{Attempts: []taugridv1.Attempt{
			{Number: 1, FailureClass: string(taugridv1.FailureGPUFault), Nodes: []string{"gpu-1"}},
			{Number: 2, FailureClass: string(taugridv1.FailureUserError), Nodes: []string{"gpu-2"}},
			{Number: 3, FailureClass: string(taugridv1.FailureNodeLost), Nodes: []string{"gpu-3", "gpu-1"}},
		}}}
	got := AttemptRun(run, 4, "p1")
	if diff := cmp.Diff([]string{"gpu-1", "gpu-3"}, got.AvoidNodes); diff != "" {
		t.Errorf("avoided nodes (-want +got):\n%s", diff)
	}
	if !got.Resume || got.RetryReason != string(taugridv1.FailureNodeLost) || got.Attempt != 4 || got.PolicyCommit != "p1" {
		t.Errorf("attempt 4: %+v, want a resume after NodeLost under p1", got)
	}
	if first := AttemptRun(run, 1, "p1"); first.Resume || len(first.AvoidNodes) > 0 {
		t.Errorf("attempt 1: %+v, want a fresh start", first)
	}
}

func TestMemoKeepsAndForgets(t *testing.T) {
	var m *Memo[string, int]
	MemoOf(&m).Put("a", 1)
	if v, ok := MemoOf(&m).Get("a"); !ok || v != 1 {
		t.Errorf("Get(a) = %d, %v; want 1, true", v, ok)
	}
	MemoOf(&m).Forget("a")
	if _, ok := m.Get("a"); ok {
		t.Error("a forgotten key is still kept")
	}
}

func TestText(t *testing.T) {
	if got := Short("0123456789abcdef0123"); got != "0123456789ab" {
		t.Errorf("Short = %q", got)
	}
	if got := FirstLine("refused:\nfile tau.yaml, line 3"); got != "refused:" {
		t.Errorf("FirstLine = %q", got)
	}
	for range 100 {
		if d := Jitter(time.Minute); d < time.Minute || d > 66*time.Second {
			t.Fatalf("Jitter(1m) = %s, want within 10%% above", d)
		}
	}
	if d := Jitter(0); d < time.Minute {
		t.Errorf("Jitter(0) = %s, want at least a minute", d)
	}
}
