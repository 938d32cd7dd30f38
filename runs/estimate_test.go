package runs

import (
	"testing"
	"time"
)

const minute = time.Minute

// Scripted queues: the estimate follows the runs ahead's limits and
// progress, starts the waiting runs in order as GPUs free up, and says
// when a run can never start or when nothing ahead has a limit to reason
// from.
func TestTheStartEstimateFollowsTheRunsAhead(t *testing.T) {
	cases := map[string]struct {
		q    Queue
		want []string
	}{
		"free GPUs: starts now": {
			q:    Queue{Capacity: 8, Running: []Slot{{Run: "a", GPUs: 4, Limit: 60 * minute, Elapsed: 10 * minute}}, Waiting: []Slot{{Run: "w", GPUs: 4, Limit: 30 * minute}}},
			want: []string{"starts within a minute"},
		},
		"by the limits of the runs ahead": {
			q: Queue{Capacity: 8,
				Running: []Slot{{Run: "a", GPUs: 4, Limit: 60 * minute, Elapsed: 35 * minute}, {Run: "b", GPUs: 4, Limit: 120 * minute, Elapsed: 20 * minute}},
				Waiting: []Slot{{Run: "w1", GPUs: 4, Limit: 60 * minute}, {Run: "w2", GPUs: 8, Limit: 30 * minute}, {Run: "w3", GPUs: 2, Limit: 10 * minute}}},
			// w1 takes a's GPUs at 25 min; w2 needs all 8: b ends at 100, w1 at 85;
			// w3 waits behind w2, which ends at 130.
			want: []string{"starts in about 25 min", "starts in about 1 h 40 min", "starts in about 2 h 10 min"},
		},
		"progress beats the limit": {
			q: Queue{Capacity: 4, Running: []Slot{{Run: "a", GPUs: 4, Limit: 10 * time.Hour, Elapsed: 30 * minute, Progress: 0.5}},
				Waiting: []Slot{{Run: "w", GPUs: 4, Limit: time.Hour}}},
			want: []string{"starts in about 30 min"},
		},
		"progress at the pace it had when reported": {
			// Half done at 30 min, reported 10 min ago: 20 min left.
			q: Queue{Capacity: 4, Running: []Slot{{Run: "a", GPUs: 4, Limit: 10 * time.Hour, Elapsed: 40 * minute, Progress: 0.5, ProgressAt: 30 * minute}},
				Waiting: []Slot{{Run: "w", GPUs: 4, Limit: time.Hour}}},
			want: []string{"starts in about 20 min"},
		},
		"a run behind the pace it reported is bounded by its limit": {
			q: Queue{Capacity: 4, Running: []Slot{{Run: "a", GPUs: 4, Limit: 2 * time.Hour, Elapsed: 70 * minute, Progress: 0.5, ProgressAt: 30 * minute}},
				Waiting: []Slot{{Run: "w", GPUs: 4, Limit: time.Hour}}},
			want: []string{"starts in about 50 min"},
		},
		"progress never past the limit": {
			q: Queue{Capacity: 4, Running: []Slot{{Run: "a", GPUs: 4, Limit: 40 * minute, Elapsed: 30 * minute, Progress: 0.1}},
				Waiting: []Slot{{Run: "w", GPUs: 4, Limit: time.Hour}}},
			want: []string{"starts in about 10 min"},
		},
		"more GPUs than the quota ever holds": {
			q:    Queue{Capacity: 8, Waiting: []Slot{{Run: "huge", GPUs: 16, Limit: time.Hour}, {Run: "w", GPUs: 8, Limit: time.Hour}}},
			want: []string{"will not start: it needs 16 GPUs and its queue's quota holds at most 8", "starts within a minute"},
		},
		"more GPUs than its own quota, within what it may borrow": {
			q:    Queue{Capacity: 8, Borrowable: -1, Waiting: []Slot{{Run: "big", GPUs: 12, Limit: time.Hour}}},
			want: []string{"start time unknown: it needs 12 GPUs, more than its queue's own 8: it starts when the cohort lends the rest"},
		},
		"a run ahead without a limit": {
			q:    Queue{Capacity: 8, Running: []Slot{{Run: "a", GPUs: 8, Elapsed: time.Hour}}, Waiting: []Slot{{Run: "w", GPUs: 1, Limit: time.Hour}}},
			want: []string{"start time unknown: run a ahead has no time limit"},
		},
		"a run past its limit is about to end": {
			q:    Queue{Capacity: 2, Running: []Slot{{Run: "a", GPUs: 2, Limit: time.Hour, Elapsed: 61 * minute}}, Waiting: []Slot{{Run: "w", GPUs: 2, Limit: time.Hour}}},
			want: []string{"starts within a minute"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := Estimate(c.q)
			if len(got) != len(c.want) {
				t.Fatalf("%d estimates for %d waiting runs", len(got), len(c.want))
			}
			for i, s := range got {
				if s.Text() != c.want[i] {
					t.Errorf("%s: %q, want %q", s.Run, s.Text(), c.want[i])
				}
			}
		})
	}
}

func TestAboutRoundsAsAPersonSaysIt(t *testing.T) {
	for d, want := range map[time.Duration]string{
		20 * time.Second: "1 min", 7 * minute: "7 min", 59 * minute: "59 min", 100 * minute: "1 h 40 min",
		119 * minute: "2 h", 121 * minute: "2 h", 128 * minute: "2 h 10 min", 200 * minute: "3 h", 10 * time.Hour: "10 h",
	} {
		if got := About(d); got != want {
			t.Errorf("About(%s) = %q, want %q", d, got, want)
		}
	}
}
