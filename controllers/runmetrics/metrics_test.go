package runmetrics

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// metricsRun builds a run in ns whose status went through phases, each
// given as minutes after t0.
func metricsRun(ns string, phases map[int]taugridv1.RunPhase, order []int, failed ...string) taugridv1.TauRun {
	r := taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
	for _, m := range order {
		r.Status.Phases = append(r.Status.Phases, taugridv1.PhaseTransition{Phase: phases[m], Time: metav1.NewTime(t0.Add(time.Duration(m) * time.Minute))})
		r.Status.Phase = phases[m]
	}
	for i, c := range failed {
		r.Status.Attempts = append(r.Status.Attempts, taugridv1.Attempt{Number: i + 1, FailureClass: c})
	}
	return r
}

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func TestSummarizeRunsCountsPhasesFailuresAndWaits(t *testing.T) {
	runs := []taugridv1.TauRun{
		// Queued 10 minutes, ran, was preempted, queued again 30 minutes.
		metricsRun("team-a", map[int]taugridv1.RunPhase{0: "Queued", 10: "Admitted", 11: "Running", 20: "Queued", 50: "Admitted"},
			[]int{0, 10, 11, 20, 50}, "Preempted"),
		// Still queued since minute 5.
		metricsRun("team-a", map[int]taugridv1.RunPhase{5: "Queued"}, []int{5}),
		// Failed twice with OOM.
		metricsRun("team-b", map[int]taugridv1.RunPhase{0: "Queued", 1: "Running", 2: "Failed"}, []int{0, 1, 2}, "OOMKilled", "OOMKilled"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b"}}, // not reconciled yet
	}
	s := summarizeRuns(runs, t0.Add(65*time.Minute))
	if diff := cmp.Diff(map[[2]string]int{{"team-a", "Admitted"}: 1, {"team-a", "Queued"}: 1, {"team-b", "Failed"}: 1, {"team-b", "Pending"}: 1}, s.phases); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[[2]string]int{{"team-a", "Preempted"}: 1, {"team-b", "OOMKilled"}: 2}, s.failed); diff != "" {
		t.Errorf("failed attempts (-want +got):\n%s", diff)
	}
	if got := s.waits["team-a"]; got.count != 2 || got.sum != 40*60 || got.buckets[900] != 1 || got.buckets[1800] != 2 {
		t.Errorf("team-a waits: %+v, want 2 waits (10m, 30m)", got)
	}
	if got, want := s.oldestQueued, map[string]time.Duration{"team-a": time.Hour}; !cmp.Equal(want, got) {
		t.Errorf("oldest queued = %v, want %v", got, want)
	}
}

// TestEveryWaitBucketIsExported: a namespace whose runs all waited long
// still exports its short buckets, empty, so histogram_quantile reads
// them as no wait that short, not as missing.
func TestEveryWaitBucketIsExported(t *testing.T) {
	runs := []taugridv1.TauRun{metricsRun("team-a", map[int]taugridv1.RunPhase{0: "Queued", 120: "Admitted"}, []int{0, 120})}
	h := summarizeRuns(runs, t0.Add(3*time.Hour)).waits["team-a"]
	if len(h.buckets) != len(queueWaitBuckets) {
		t.Fatalf("%d buckets exported, want all %d", len(h.buckets), len(queueWaitBuckets))
	}
	for _, b := range queueWaitBuckets {
		want := uint64(0)
		if b >= 7200 {
			want = 1
		}
		if got, ok := h.buckets[b]; !ok || got != want {
			t.Errorf("bucket le=%g: %d (present %v), want %d", b, got, ok, want)
		}
	}
}

func TestRunningRunsExportTheirIdleGPUs(t *testing.T) {
	running := func(name string, u *taugridv1.GPUUsage) taugridv1.TauRun {
		r := metricsRun("team-a", map[int]taugridv1.RunPhase{0: "Running"}, []int{0})
		r.Name, r.Status.Attempts = name, []taugridv1.Attempt{{Number: 1, GPUUsage: u}}
		return r
	}
	ended := running("ended", &taugridv1.GPUUsage{GPUs: 8, Idle: true})
	ended.Status.Phase = taugridv1.PhaseFailed
	runs := []taugridv1.TauRun{running("idle", &taugridv1.GPUUsage{GPUs: 8, Idle: true}), running("busy", &taugridv1.GPUUsage{GPUs: 4}),
		running("unread", nil), ended}
	s := summarizeRuns(runs, t0)
	if diff := cmp.Diff(map[[2]string]int{{"team-a", "idle"}: 8, {"team-a", "busy"}: 0}, s.gpusIdle); diff != "" {
		t.Errorf("idle GPUs (-want +got):\n%s", diff)
	}
}

// TestOnlyTheLeaderExportsRunMetrics: a standby replica's scrape has no run
// series, so sums over replicas count each run once.
func TestOnlyTheLeaderExportsRunMetrics(t *testing.T) {
	elected := make(chan struct{})
	c := &RunCollector{Client: listerOf(metricsRun("team-a", map[int]taugridv1.RunPhase{0: "Queued"}, []int{0})),
		Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Hour)), Elected: elected}
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("a standby exports %d series, want none", n)
	}
	close(elected)
	if n := testutil.CollectAndCount(c, MetricRuns, MetricRunOldestQueued); n != 2 {
		t.Errorf("the leader exports %d run series, want 2", n)
	}
}

// listerOf is a client.Reader that lists the given runs.
func listerOf(runs ...taugridv1.TauRun) client.Reader {
	return fakeLister{runs: runs}
}

type fakeLister struct {
	client.Reader
	runs []taugridv1.TauRun
}

func (f fakeLister) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*taugridv1.TauRunList).Items = f.runs
	return nil
}
