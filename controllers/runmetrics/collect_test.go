package runmetrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// TestQueueWaits: one wait per admission, from the Queued before it; a
// phase between them (a cancellation, a failure) means that queueing
// ended unadmitted.
func TestQueueWaits(t *testing.T) {
	at := func(phase taugridv1.RunPhase, minute int) taugridv1.PhaseTransition {
		return taugridv1.PhaseTransition{Phase: phase, Time: metav1.NewTime(t0.Add(time.Duration(minute) * time.Minute))}
	}
	cases := map[string]struct {
		phases []taugridv1.PhaseTransition
		want   []time.Duration
	}{
		"never queued":          {},
		"queued, then admitted": {phases: []taugridv1.PhaseTransition{at("Queued", 0), at("Admitted", 10)}, want: []time.Duration{10 * time.Minute}},
		"queued, then running, no admission recorded": {phases: []taugridv1.PhaseTransition{at("Queued", 0), at("Running", 5)}, want: []time.Duration{5 * time.Minute}},
		"queued, then cancelled":                      {phases: []taugridv1.PhaseTransition{at("Queued", 0), at("Cancelled", 3)}},
		"queued, failed, then admitted: no wait ended in that admission": {
			phases: []taugridv1.PhaseTransition{at("Queued", 0), at("Failed", 1), at("Admitted", 2)},
		},
		"admitted, then running: one wait, not two": {
			phases: []taugridv1.PhaseTransition{at("Queued", 0), at("Admitted", 1), at("Running", 2)}, want: []time.Duration{time.Minute},
		},
		"preempted and queued again: a wait per admission": {
			phases: []taugridv1.PhaseTransition{at("Queued", 0), at("Admitted", 1), at("Running", 2), at("Queued", 10), at("Admitted", 40)},
			want:   []time.Duration{time.Minute, 30 * time.Minute},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, queueWaits(tc.phases)); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCollectExportsEverySeries: the collector's scrape, as Prometheus
// reads it: runs by phase, failed attempts by class, the oldest queued
// run (one in Queued whose entry is not recorded is not counted), idle
// GPUs of running runs, and a queue waits' histogram per namespace that
// waited.
func TestCollectExportsEverySeries(t *testing.T) {
	idle := metricsRun("team-a", map[int]taugridv1.RunPhase{0: "Queued", 5: "Running"}, []int{0, 5}, "Preempted")
	idle.Name = "idle"
	idle.Status.Attempts = append(idle.Status.Attempts, taugridv1.Attempt{Number: 2, GPUUsage: &taugridv1.GPUUsage{GPUs: 8, Idle: true}})
	unrecorded := taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b"}, Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseQueued}}
	c := &RunCollector{Client: listerOf(idle, metricsRun("team-a", map[int]taugridv1.RunPhase{20: "Queued"}, []int{20}), unrecorded),
		Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Hour))}
	want := `
# HELP taugrid_run_attempts_failed Failed attempts recorded in the status of the TauRuns in the cluster, by namespace and failure class.
# TYPE taugrid_run_attempts_failed gauge
taugrid_run_attempts_failed{class="Preempted",namespace="team-a"} 1
# HELP taugrid_run_gpus_idle GPUs of each running TauRun's attempt that are idle by the platform's rule (limits.yaml idle_gpu_percent for idle_gpu_time); 0 for a running attempt whose GPUs are read and busy.
# TYPE taugrid_run_gpus_idle gauge
taugrid_run_gpus_idle{namespace="team-a",run="idle"} 8
# HELP taugrid_run_oldest_queued_seconds How long the longest-waiting TauRun now in Queued has waited, by namespace.
# TYPE taugrid_run_oldest_queued_seconds gauge
taugrid_run_oldest_queued_seconds{namespace="team-a"} 2400
# HELP taugrid_runs TauRuns in the cluster by namespace and phase.
# TYPE taugrid_runs gauge
taugrid_runs{namespace="team-a",phase="Queued"} 1
taugrid_runs{namespace="team-a",phase="Running"} 1
taugrid_runs{namespace="team-b",phase="Queued"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), MetricRuns, MetricRunAttemptsFailed, MetricRunOldestQueued, MetricRunGPUsIdle); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, MetricRunQueueWait); n != 1 {
		t.Errorf("%d queue wait histograms, want 1 (team-a's)", n)
	}
}

// TestCollectExportsNothingWhenTheListFails: a scrape whose list fails has
// no run series (absent, not a wrong zero).
func TestCollectExportsNothingWhenTheListFails(t *testing.T) {
	c := &RunCollector{Client: failingLister{}, Clock: clocktesting.NewFakePassiveClock(t0), Log: logr.Discard()}
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("a failed list exports %d series, want none", n)
	}
}

// failingLister is a client.Reader whose lists fail.
type failingLister struct{ client.Reader }

func (failingLister) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the cache is not synced")
}
