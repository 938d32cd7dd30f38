package main

import (
	"strings"
	"testing"
)

func TestTheRunControllersQueueIsReadApartFromTheOthers(t *testing.T) {
	mfs, err := parseMetrics(strings.NewReader(`# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="taurun",le="+Inf"} 4
workqueue_queue_duration_seconds_sum{name="taurun"} 2
workqueue_queue_duration_seconds_count{name="taurun"} 4
workqueue_queue_duration_seconds_bucket{name="taurepository",le="+Inf"} 10
workqueue_queue_duration_seconds_sum{name="taurepository"} 100
workqueue_queue_duration_seconds_count{name="taurepository"} 10
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := histWith(mfs["workqueue_queue_duration_seconds"], "name", runController); got != (histSum{n: 4, secs: 2}) {
		t.Errorf("the run controller's queue: %+v, want 4 waits of 2 s in all", got)
	}
	if got := histOf(mfs["workqueue_queue_duration_seconds"]); got != (histSum{n: 14, secs: 102}) {
		t.Errorf("every queue: %+v, want 14 waits of 102 s in all", got)
	}
}

func TestGaugesAndCountersAreSummedByOneLabel(t *testing.T) {
	mfs, err := parseMetrics(strings.NewReader(`# TYPE workqueue_depth gauge
workqueue_depth{name="taurun"} 7
workqueue_depth{name="evidence"} 2
# TYPE taugrid_git_requests_total counter
taugrid_git_requests_total{operation="list",result="ok"} 10
taugrid_git_requests_total{operation="list",result="error"} 1
taugrid_git_requests_total{operation="fetch",result="ok"} 3
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := byLabel(mfs["workqueue_depth"], "name"); got["taurun"] != 7 || got["evidence"] != 2 || len(got) != 2 {
		t.Errorf("queue depths %v, want taurun 7 and evidence 2", got)
	}
	if got := byLabel(mfs["taugrid_git_requests_total"], "operation"); got["list"] != 11 || got["fetch"] != 3 {
		t.Errorf("git operations %v, want 11 listings (both results) and 3 fetches", got)
	}
}

func TestTheControllersRequestsArePerRunEndedByWhatTheyAreWithoutWatches(t *testing.T) {
	base := counters{apiByWhat: map[string]float64{"create jobs.batch": 10, "watch pods": 3}}
	cur := counters{apiByWhat: map[string]float64{"create jobs.batch": 30, "patch tauruns.taugrid.dev/status": 110, "watch pods": 9, "list events": 10}}
	if got, want := perRunByWhat(base, cur, 20), "patch tauruns.taugrid.dev/status 5.50, create jobs.batch 1.00, list events 0.50"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	cur.refusedByWhat = map[string]float64{"patch tauruns.taugrid.dev/status": 4}
	if got, want := refusedByWhat(base, cur, 20), "patch tauruns.taugrid.dev/status 0.20"; got != want {
		t.Errorf("refused: %q, want %q", got, want)
	}
	if got := refusedByWhat(cur, cur, 20); got != "none" {
		t.Errorf("refused, none since base: %q", got)
	}
	if got := perRunByWhat(counters{}, counters{}, 20); !strings.HasPrefix(got, "none counted") {
		t.Errorf("without the metric: %q", got)
	}
}

// A list etcd serves reads every object under its prefix, whatever its
// selector returns; the report says so, the most read first.
func TestListsAreReportedByWhatTheyRead(t *testing.T) {
	prev := apiRequests{listed: map[string]listedObjects{"etcd events": {lists: 10, read: 1000, returned: 10}}}
	cur := apiRequests{listed: map[string]listedObjects{
		"etcd events": {lists: 30, read: 81000, returned: 50},
		"cache pods":  {lists: 20, read: 400, returned: 40},
		"cache nodes": {lists: 0, read: 0, returned: 0},
	}}
	want := "etcd events: 1.0 lists a second read 4000 objects and returned 2; cache pods: 1.0 lists a second read 20 objects and returned 2"
	if got := listCost(prev, cur, 20, 3); got != want {
		t.Errorf("listCost:\n got %s\nwant %s", got, want)
	}
	if got := listCost(cur, cur, 20, 3); got != "none" {
		t.Errorf("no list since the last sample: %q, want none", got)
	}
}

// A window's percentiles come from what each bucket gained in it, not
// from the histogram since the controller started.
func TestPhaseWritePercentilesAreTheWindows(t *testing.T) {
	read := func(text string) counters {
		t.Helper()
		mfs, err := parseMetrics(strings.NewReader("# TYPE taugrid_run_phase_write_seconds histogram\n" + text))
		if err != nil {
			t.Fatal(err)
		}
		return counters{phaseWrites: phaseWritesOf(mfs)}
	}
	prev := read(`taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="0.1"} 100
taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="1"} 100
taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="10"} 100
taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="+Inf"} 100
taugrid_run_phase_write_seconds_sum{phase="Admitted"} 5
taugrid_run_phase_write_seconds_count{phase="Admitted"} 100
`)
	cur := read(`taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="0.1"} 100
taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="1"} 190
taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="10"} 200
taugrid_run_phase_write_seconds_bucket{phase="Admitted",le="+Inf"} 200
taugrid_run_phase_write_seconds_sum{phase="Admitted"} 60
taugrid_run_phase_write_seconds_count{phase="Admitted"} 200
taugrid_run_phase_write_seconds_bucket{phase="Running",le="0.1"} 0
taugrid_run_phase_write_seconds_bucket{phase="Running",le="1"} 0
taugrid_run_phase_write_seconds_bucket{phase="Running",le="10"} 0
taugrid_run_phase_write_seconds_bucket{phase="Running",le="+Inf"} 3
taugrid_run_phase_write_seconds_sum{phase="Running"} 90
taugrid_run_phase_write_seconds_count{phase="Running"} 3
`)
	// Admitted: 100 new, 90 of them 0.1-1 s, 10 of them 1-10 s; Running:
	// 3, all past the last bound.
	if got, want := phaseWritesSince(prev, cur), "Admitted 600 ms / 9.1 s (100), Running 10.0 s / 10.0 s (3)"; got != want {
		t.Errorf("phaseWritesSince = %q, want %q", got, want)
	}
	if got := phaseWritesSince(cur, cur); got != "none" {
		t.Errorf("nothing new: %q, want none", got)
	}
}
