package run

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/api/gpus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
)

// usageStart is when the attempts of these tables started running.
var usageStart = time.Date(2026, 11, 30, 10, 0, 20, 0, time.UTC)

// agentReport is one node's /gpus answer: n GPUs held by pod in ns, each
// at pct(minute) for the minutes [0, minutes) from usageStart's minute.
func agentReport(node, ns, pod string, n, minutes int, pct func(int) float64) *gpus.Report {
	return agentWindow(node, ns, pod, n, 0, minutes, pct)
}

// agentWindow is agentReport keeping only the minutes [from, to), as an
// agent's hour-long history does.
func agentWindow(node, ns, pod string, n, from, to int, pct func(int) float64) *gpus.Report {
	rep := &gpus.Report{Node: node, StepSeconds: 60}
	for i := range n {
		g := gpus.GPU{Index: i, UUID: node + "-gpu-" + string(rune('0'+i)), Holder: gpus.Holder{Namespace: ns, Pod: pod, Container: "main"}}
		for m := from; m < to; m++ {
			g.History = append(g.History, gpus.Point{Start: usageStart.Truncate(time.Minute).Add(time.Duration(m) * time.Minute),
				Pct: pct(m), Samples: 4, Holder: g.Holder})
		}
		rep.GPUs = append(rep.GPUs, g)
	}
	return rep
}

func flat(p float64) func(int) float64 { return func(int) float64 { return p } }

func TestAnAttemptsGPUUsageIsSummedUpFromItsOwnPodsOnly(t *testing.T) {
	idle := &render.IdleRule{BelowPercent: 5, For: 30 * time.Minute, Action: render.IdleStop}
	pods := map[string]bool{"run-1-0": true}
	tests := map[string]struct {
		reports map[string]*gpus.Report
		unread  []string
		want    int
		after   time.Duration
		summary string
		idle    bool
	}{
		"a busy attempt": {
			reports: map[string]*gpus.Report{"n1": agentReport("n1", "team-a", "run-1-0", 8, 15, flat(91))},
			want:    8, after: 15 * time.Minute, summary: "8 GPUs, 91% busy over the last 10 min"},
		"a young attempt speaks of the minutes it ran": {
			reports: map[string]*gpus.Report{"n1": agentReport("n1", "team-a", "run-1-0", 1, 4, flat(40))},
			want:    1, after: 4 * time.Minute, summary: "1 GPU, 40% busy over the last 4 min"},
		"another tenant's busy GPUs and another pod's of the same tenant count for nothing": {
			reports: map[string]*gpus.Report{
				"n1": merge(agentReport("n1", "team-a", "run-1-0", 2, 40, flat(1)), agentReport("n1", "team-b", "run-1-0", 4, 40, flat(100)),
					agentReport("n1", "team-a", "other-0", 2, 40, flat(100)))},
			want: 2, after: 40 * time.Minute, summary: "2 GPUs, 1% busy over the last 10 min; idle: under 5% since 10:00 UTC", idle: true},
		"idle, but for less than the idle time": {
			reports: map[string]*gpus.Report{"n1": agentReport("n1", "team-a", "run-1-0", 8, 40, func(m int) float64 {
				if m < 15 {
					return 90
				}
				return 0
			})},
			want: 8, after: 40 * time.Minute, summary: "8 GPUs, 0% busy over the last 10 min"},
		"idle GPUs of which only some were read are not called idle": {
			reports: map[string]*gpus.Report{"n1": agentReport("n1", "team-a", "run-1-0", 4, 40, flat(0))},
			want:    8, after: 40 * time.Minute, summary: "4 of 8 GPUs, 0% busy over the last 10 min"},
		"an agent that does not answer": {
			unread: []string{"n1"}, want: 8, after: 5 * time.Minute,
			summary: "8 GPUs, utilisation unknown; no answer from the node agent on n1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			minutes, seen := attemptMinutes(tc.reports, "team-a", pods)
			u := foldGPUUsage(nil, usageReading{minutes: minutes, seen: seen, want: tc.want, unread: tc.unread},
				usageStart, usageStart.Add(tc.after), idle)
			if u.Summary != tc.summary || u.Idle != tc.idle {
				t.Errorf("summary %q idle %v, want %q idle %v", u.Summary, u.Idle, tc.summary, tc.idle)
			}
		})
	}
}

func merge(reps ...*gpus.Report) *gpus.Report {
	out := &gpus.Report{Node: reps[0].Node, StepSeconds: 60}
	for _, r := range reps {
		out.GPUs = append(out.GPUs, r.GPUs...)
	}
	return out
}

func TestTheUsageSeriesFoldsEachMinuteOnceAndStaysBounded(t *testing.T) {
	pods := map[string]bool{"run-1-0": true}
	rep := func(minutes int) usageReading {
		m, seen := attemptMinutes(map[string]*gpus.Report{"n1": agentWindow("n1", "team-a", "run-1-0", 8, max(0, minutes-60), minutes,
			func(m int) float64 { return float64(m % 100) })}, "team-a", pods)
		return usageReading{minutes: m, seen: seen, want: 8}
	}
	var u *taugridv1.GPUUsage
	// Read every minute for a week's worth of minutes, as the agent's
	// hour-long history slides; the series never holds more than its bound.
	for m := 1; m <= 3*24*60; m += 7 {
		u = foldGPUUsage(u, rep(m), usageStart, usageStart.Add(time.Duration(m)*time.Minute), nil)
		if n := len(u.Series.Points); n > taugridv1.MaxGPUUsagePoints {
			t.Fatalf("%d points after %d minutes, want at most %d", n, m, taugridv1.MaxGPUUsagePoints)
		}
	}
	folded := 0
	for _, p := range u.Series.Points {
		folded += int(p.Minutes)
	}
	if want := int(u.Through.Sub(u.Series.Start.Time) / time.Minute); folded != want {
		t.Errorf("the series folds %d minutes, want each of the %d whole minutes once", folded, want)
	}
	if u.Series.StepMinutes < 32 {
		t.Errorf("step %d minutes after three days, want coarser", u.Series.StepMinutes)
	}
	short := foldGPUUsage(nil, rep(3), usageStart, usageStart.Add(3*time.Minute+30*time.Second), nil)
	want := []taugridv1.GPUUsagePoint{{Minute: 0, Percent: 0, Minutes: 1}, {Minute: 1, Percent: 1, Minutes: 1}, {Minute: 2, Percent: 2, Minutes: 1}}
	if diff := cmp.Diff(want, short.Series.Points); diff != "" {
		t.Errorf("points of a 3-minute attempt (-want +got):\n%s", diff)
	}
}

// TestTheGPUsAnAttemptHeldAreRecordedByUUID: every reading adds the UUIDs
// of the GPUs the attempt's own pods held, sorted and each once; another
// tenant's GPU, or another pod's of the same tenant, is never named.
func TestTheGPUsAnAttemptHeldAreRecordedByUUID(t *testing.T) {
	pods := map[string]bool{"run-1-0": true, "run-1-1": true}
	first := map[string]*gpus.Report{
		"n1": merge(agentReport("n1", "team-a", "run-1-0", 2, 3, flat(90)), agentReport("n1", "team-b", "run-1-0", 1, 3, flat(90))),
		"n2": agentReport("n2", "team-a", "other-0", 1, 3, flat(90)),
	}
	u := foldGPUUsage(nil, usageReading{uuids: heldUUIDs(first, "team-a", pods), seen: 2, want: 3}, usageStart, usageStart.Add(3*time.Minute), nil)
	if d := cmp.Diff([]string{"n1-gpu-0", "n1-gpu-1"}, u.UUIDs); d != "" {
		t.Errorf("after the first reading (-want +got):\n%s", d)
	}
	second := map[string]*gpus.Report{"n1": agentReport("n1", "team-a", "run-1-0", 1, 4, flat(90)), "n3": agentReport("n3", "team-a", "run-1-1", 1, 4, flat(90))}
	u = foldGPUUsage(u, usageReading{uuids: heldUUIDs(second, "team-a", pods), seen: 2, want: 3}, usageStart, usageStart.Add(4*time.Minute), nil)
	if d := cmp.Diff([]string{"n1-gpu-0", "n1-gpu-1", "n3-gpu-0"}, u.UUIDs); d != "" {
		t.Errorf("after the second reading (-want +got):\n%s", d)
	}
	many := make([]string, 100)
	for i := range many {
		many[i] = fmt.Sprintf("GPU-%03d", 99-i)
	}
	if got := mergeUUIDs(nil, many); len(got) != taugridv1.MaxGPUUUIDs || got[0] != "GPU-000" {
		t.Errorf("100 GPUs: recorded %d from %v, want the first %d", len(got), got[:1], taugridv1.MaxGPUUUIDs)
	}
}
