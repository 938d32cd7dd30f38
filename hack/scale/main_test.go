package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
