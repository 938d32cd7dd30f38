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
