package main

import (
	"strings"
	"testing"
	"time"
)

func TestARunNotEndedWaitsWhereTheClusterLeftIt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rec := newRecorder()
	rec.runs = map[string]*runTimes{
		// No Job yet: TauGrid's turn, 90 s after the TauRun.
		"new": {created: at(10)},
		// Admitted, still suspended: Kueue's turn, 60 s; the TauRun says Admitted.
		"suspended": {created: at(0), admittedRun: at(41), clusterTimes: clusterTimes{job: at(20), admittedWl: at(40)}},
		// Admitted 30 s ago and the TauRun does not say so: behind.
		"unsaid": {created: at(0), clusterTimes: clusterTimes{job: at(20), admittedWl: at(70), jobStarted: at(71)}},
		// Running for 20 s of 60: the pod's own time.
		"running": {created: at(0), admittedRun: at(31), runRunning: at(81), clusterTimes: clusterTimes{job: at(1), admittedWl: at(30),
			jobStarted: at(31), podCreated: at(32), podScheduled: at(33), podRunning: at(80), podDue: at(140)}},
		// Due 30 s ago, no exit written: the harness's turn; its TauRun still says Admitted.
		"overdue": {created: at(0), admittedRun: at(3), clusterTimes: clusterTimes{job: at(1), admittedWl: at(2),
			jobStarted: at(3), podCreated: at(4), podScheduled: at(5), podRunning: at(10), podDue: at(70)}},
		// The Job ended 40 s ago: TauGrid's turn to end the run, and its Workload is not Finished.
		"jobdone": {created: at(0), admittedRun: at(3), runRunning: at(11), clusterTimes: clusterTimes{job: at(1), admittedWl: at(2),
			jobStarted: at(3), podCreated: at(4), podScheduled: at(5), podRunning: at(10), podDue: at(20), podDone: at(21), jobDone: at(60)}},
		// Ended: counted only for its Workload, still not Finished 50 s after its Job.
		"ended": {created: at(0), admittedRun: at(3), runRunning: at(11), runDone: at(51), clusterTimes: clusterTimes{job: at(1), admittedWl: at(2),
			jobStarted: at(3), podCreated: at(4), podScheduled: at(5), podRunning: at(10), podDue: at(20), podDone: at(21), jobDone: at(50)}},
	}
	rec.runs["overdue"].message = "admitted; the Job is creating its pods"
	got := rec.waiting(at(100))
	for _, want := range []string{
		"TauGrid to create the Job 1 (oldest 1m30s)",
		"Kueue to start the Job 1 (oldest 1m0s)",
		"the Job controller to create the pod 1 (oldest 29s)",
		"the pod's run time 1 (oldest 20s)",
		"the harness to end the pod 1 (oldest 30s)",
		"TauGrid to end the run 1 (oldest 40s)",
		"Kueue's admission 1 (oldest 30s)",
		`a pod Running 1 (oldest 1m30s) (overdue: "admitted; the Job is creating its pods")`,
		"Workloads not Finished after their Job ended: 2 (oldest 50s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("waiting line lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Kueue to admit") || strings.Contains(got, "the scheduler") {
		t.Errorf("waiting line names a stage no run is in:\n%s", got)
	}
}

func TestTheSlowestRunsComeWithTheirTimelines(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := newRecorder()
	for name, lag := range map[string]int{"a": 2, "b": 9, "c": 5} {
		rec.runs[name] = &runTimes{requested: t0, created: t0.Add(time.Second), runRunning: t0.Add(time.Duration(10+lag) * time.Second),
			clusterTimes: clusterTimes{podRunning: t0.Add(10 * time.Second)}}
	}
	got := rec.slowest([]string{"a", "b", "c", "gone"}, 2, func(t *runTimes) time.Time { return t.runRunning }, func(t *runTimes) time.Time { return t.podRunning })
	want := []string{
		"b (9.0 s): requested, +1.0 s TauRun, +10.0 s pod Running, +19.0 s TauRun Running",
		"c (5.0 s): requested, +1.0 s TauRun, +10.0 s pod Running, +15.0 s TauRun Running",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("slowest:\n got %q\nwant %q", got, want)
	}
}

func TestAProcessStatLineGivesItsNameAndCPU(t *testing.T) {
	// A command name may hold spaces and parentheses; the fields count
	// from the last one.
	line := "4242 (kube (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	name, cpu, ok := parseStat(line, 100)
	if !ok || name != "kube (x) y" || cpu != 3*time.Second {
		t.Errorf("parseStat = %q, %s, %v; want \"kube (x) y\", 3s, true", name, cpu, ok)
	}
	for _, bad := range []string{"", "4242 kube S 1", "4242 (kube) S 1 2"} {
		if _, _, ok := parseStat(bad, 100); ok {
			t.Errorf("parseStat(%q) read a line that has no CPU fields", bad)
		}
	}
	a := cpuTimes{at: time.Unix(0, 0), cpu: map[string]time.Duration{"kube-apiserver": time.Second}}
	b := cpuTimes{at: time.Unix(10, 0), cpu: map[string]time.Duration{"kube-apiserver": 13 * time.Second, "etcd": time.Second}}
	if got, want := cores(a, b), "kube-apiserver 1.20, etcd 0.10"; got != want {
		t.Errorf("cores = %q, want %q", got, want)
	}
}
