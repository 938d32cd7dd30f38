package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

func TestCheckpointsDefaultToATenthHalfAndAllAndBadOnesSayWhy(t *testing.T) {
	c := config{nodes: 10, tenants: 20, repos: 100, runs: 1000, rate: 50, minRun: time.Second, maxRun: time.Minute, nodeLease: 40 * time.Second}
	if err := c.check("", "1Gi"); err != nil {
		t.Fatal(err)
	}
	if want := []int{100, 500, 1000}; !slices.Equal(c.checkpoints, want) {
		t.Errorf("default checkpoints %v, want %v", c.checkpoints, want)
	}
	for flags, want := range map[string]string{
		"10,x":     `"x" is not a number of runs from 1 to -runs (1000)`,
		"0":        `"0" is not a number`,
		"100,2000": `"2000" is not a number`,
	} {
		c := c
		c.checkpoints = nil
		if err := c.check(flags, "1Gi"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-checkpoints %s: err = %v, want it to say %s", flags, err, want)
		}
	}
	few := config{nodes: 10, tenants: 20, repos: 5, runs: 10, rate: 1, maxRun: time.Second, nodeLease: 40 * time.Second}
	if err := few.check("", "1Gi"); err == nil || !strings.Contains(err.Error(), "-repos at least -tenants") {
		t.Errorf("5 repositories for 20 tenants: err = %v, want it refused", err)
	}
	for _, lease := range []time.Duration{0, time.Second, 4500 * time.Millisecond} {
		c := c
		c.nodeLease = lease
		if err := c.check("", "1Gi"); err == nil || !strings.Contains(err.Error(), "-node-lease") {
			t.Errorf("-node-lease %s: err = %v, want it refused", lease, err)
		}
	}
	for _, bad := range []config{{kueueJobWorkers: -1}, {jobSyncs: -1}} {
		w := c
		w.kueueJobWorkers, w.jobSyncs = bad.kueueJobWorkers, bad.jobSyncs
		if err := w.check("", "1Gi"); err == nil || !strings.Contains(err.Error(), "or more") {
			t.Errorf("-kueue-job-workers %d -job-syncs %d: err = %v, want it refused", w.kueueJobWorkers, w.jobSyncs, err)
		}
	}
}

func TestRunTimesSpreadBetweenTheBounds(t *testing.T) {
	h := &harness{cfg: config{minRun: 10 * time.Second, maxRun: time.Minute}}
	var lo, hi int
	for i := range 1000 {
		d := h.runTime(fmt.Sprintf("repo-%04d-abc-1-x%d", i%100, i))
		if d < h.cfg.minRun || d >= h.cfg.maxRun {
			t.Fatalf("run time %v outside [%v, %v)", d, h.cfg.minRun, h.cfg.maxRun)
		}
		if d < 35*time.Second {
			lo++
		} else {
			hi++
		}
	}
	if lo < 400 || hi < 400 {
		t.Errorf("1,000 run times: %d below the middle, %d above, want both near 500", lo, hi)
	}
}

func TestWritesAreCountedByTheirPhaseAndThePartsTheyChanged(t *testing.T) {
	rec := newRecorder()
	tr := &taugridv1.TauRun{}
	tr.Name, tr.ResourceVersion = "r", "1"
	write := func(f func()) {
		f()
		rv, _ := strconv.Atoi(tr.ResourceVersion)
		tr.ResourceVersion = strconv.Itoa(rv + 1)
		rec.run(tr.DeepCopy(), time.Now())
	}
	rec.run(tr.DeepCopy(), time.Now()) // the create: no write counted
	write(func() { tr.Status.Phase, tr.Status.Message = taugridv1.PhasePending, "submitted" })
	write(func() { tr.Status.Phase, tr.Status.Message = taugridv1.PhaseAdmitted, "waiting for Kueue" })
	write(func() { tr.Status.Message = "creating its pods" })
	rec.run(tr.DeepCopy(), time.Now()) // the same resourceVersion again (a watch reopened): not a write
	write(func() { tr.Annotations = map[string]string{"a": "b"} })
	got := rec.writesOf([]string{"r"})
	want := "4.0: Admitted 3.0 (message 2.0, metadata 1.0, phase 1.0); Pending 1.0 (message 1.0, phase 1.0)"
	if got != want {
		t.Errorf("writes:\n got %s\nwant %s", got, want)
	}
}
