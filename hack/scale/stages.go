package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Where a run that has not ended waits, from what the watches saw of it:
// the first milestone the cluster has not shown yet names whose turn it
// is. A stall then reads as one stage growing old, and the stage says
// whether it is TauGrid's (no Job, or the Job's end not followed), Kueue's,
// the Job controller's, the scheduler's, kwok's or the harness's own.

// A stage is the wait for one milestone, entered at the one before it.
type stage struct {
	name  string
	entry func(*runTimes) time.Time // when the run entered the stage
	done  func(*runTimes) bool      // the milestone that ends it
}

// exitGrace is how long past its run time a pod may wait for the harness
// to write its exit before the wait is the harness's.
const exitGrace = 5 * time.Second

var stages = []stage{
	{"TauGrid to create the Job", func(t *runTimes) time.Time { return t.created }, func(t *runTimes) bool { return !t.job.IsZero() }},
	{"Kueue to admit", func(t *runTimes) time.Time { return t.job }, func(t *runTimes) bool { return !t.admittedWl.IsZero() }},
	{"Kueue to start the Job", func(t *runTimes) time.Time { return t.admittedWl }, func(t *runTimes) bool { return !t.jobStarted.IsZero() }},
	{"the Job controller to create the pod", func(t *runTimes) time.Time { return t.jobStarted }, func(t *runTimes) bool { return !t.podCreated.IsZero() }},
	{"the scheduler", func(t *runTimes) time.Time { return t.podCreated }, func(t *runTimes) bool { return !t.podScheduled.IsZero() }},
	{"kwok to run the pod", func(t *runTimes) time.Time { return t.podScheduled }, func(t *runTimes) bool { return !t.podRunning.IsZero() }},
	{"the pod's run time", func(t *runTimes) time.Time { return t.podRunning }, nil}, // done: see stageOf
	{"the harness to end the pod", func(t *runTimes) time.Time { return t.podDue }, func(t *runTimes) bool { return !t.podDone.IsZero() }},
	{"the Job controller to mark the Job done", func(t *runTimes) time.Time { return t.podDone }, func(t *runTimes) bool { return !t.jobDone.IsZero() }},
	{"TauGrid to end the run", func(t *runTimes) time.Time { return t.jobDone }, func(*runTimes) bool { return false }},
}

// stageOf is the stage a run not ended waits in.
func stageOf(t *runTimes, now time.Time) *stage {
	for i := range stages {
		s := &stages[i]
		if s.done == nil { // running: over once due, or once the pod ended
			if t.podDone.IsZero() && now.Before(t.podDue.Add(exitGrace)) {
				return s
			}
			continue
		}
		if !s.done(t) {
			return s
		}
	}
	return &stages[len(stages)-1]
}

// behindMargin is how long the cluster may show a milestone before a
// TauRun that does not say so yet counts as behind it.
const behindMargin = 5 * time.Second

// waitCount is how many runs wait somewhere and the oldest of them.
type waitCount struct {
	n      int
	oldest time.Duration
	run    string // the oldest's TauRun name
}

func (w *waitCount) add(name string, d time.Duration) {
	w.n++
	if d > w.oldest || w.run == "" {
		w.oldest, w.run = d, name
	}
}

func (w waitCount) String() string {
	return fmt.Sprintf("%d (oldest %s)", w.n, w.oldest.Round(time.Second))
}

// waiting is one line on the runs not ended: how many wait in each stage
// (the oldest wait), how many TauRuns say less than the cluster showed
// more than behindMargin ago, and the Workloads Kueue has not marked
// Finished after their Job ended (quota held for runs that are over).
func (r *recorder) waiting(now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	byStage := map[string]*waitCount{}
	var behindAdmit, behindRunning, unfinished waitCount
	for name, t := range r.runs {
		if !t.jobDone.IsZero() && t.wlFinished.IsZero() && !t.admittedWl.IsZero() {
			unfinished.add(name, now.Sub(t.jobDone))
		}
		if !t.runDone.IsZero() {
			continue
		}
		s := stageOf(t, now)
		w := byStage[s.name]
		if w == nil {
			w = &waitCount{}
			byStage[s.name] = w
		}
		w.add(name, now.Sub(s.entry(t)))
		if !t.admittedWl.IsZero() && t.admittedRun.IsZero() && now.Sub(t.admittedWl) > behindMargin {
			behindAdmit.add(name, now.Sub(t.admittedWl))
		}
		if !t.podRunning.IsZero() && t.runRunning.IsZero() && now.Sub(t.podRunning) > behindMargin {
			behindRunning.add(name, now.Sub(t.podRunning))
		}
	}
	var parts []string
	for _, s := range stages {
		if w := byStage[s.name]; w != nil {
			parts = append(parts, s.name+" "+w.String())
		}
	}
	line := fmt.Sprintf("runs not ended, by what they wait for: %s; TauRuns behind the cluster by over %s: Kueue's admission %s, a pod Running %s",
		strings.Join(parts, ", "), behindMargin, behindAdmit, behindRunning)
	if behindRunning.n > 0 {
		line += fmt.Sprintf(" (%s: %q)", behindRunning.run, r.runs[behindRunning.run].message)
	}
	return line + fmt.Sprintf("; Workloads not Finished after their Job ended: %s", unfinished)
}

// A milestone is one thing the watches saw of a run, and when.
type milestone struct {
	name string
	at   time.Time
}

// milestones names every time a run has, in the order they happened.
func (t *runTimes) milestones() []milestone {
	all := []milestone{
		{"requested", t.requested}, {"TauRun", t.created}, {"Job", t.job}, {"Workload admitted", t.admittedWl},
		{"TauRun Admitted", t.admittedRun}, {"Job started", t.jobStarted}, {"pod", t.podCreated}, {"pod scheduled", t.podScheduled},
		{"pod Running", t.podRunning}, {"TauRun Running", t.runRunning}, {"pod ended", t.podDone}, {"Job done", t.jobDone},
		{"TauRun ended", t.runDone}, {"Workload Finished", t.wlFinished},
	}
	all = slices.DeleteFunc(all, func(m milestone) bool { return m.at.IsZero() })
	slices.SortStableFunc(all, func(a, b milestone) int { return a.at.Compare(b.at) })
	return all
}

// timeline is a run's milestones as offsets from its first, for instance
// "requested, +1.2 s TauRun, +3.0 s Job, ...".
func (t *runTimes) timeline() string {
	ms := t.milestones()
	if len(ms) == 0 {
		return "nothing seen"
	}
	parts := []string{ms[0].name}
	for _, m := range ms[1:] {
		parts = append(parts, fmt.Sprintf("+%s %s", fmtDur(m.at.Sub(ms[0].at)), m.name))
	}
	return strings.Join(parts, ", ")
}

// slowest are the n runs of names that a lag (later minus earlier) was
// longest for, each with its timeline.
func (r *recorder) slowest(names []string, n int, later, earlier func(*runTimes) time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type lagged struct {
		name string
		lag  time.Duration
	}
	var ls []lagged
	for _, name := range names {
		t := r.runs[name]
		if t == nil || later(t).IsZero() || earlier(t).IsZero() {
			continue
		}
		ls = append(ls, lagged{name, later(t).Sub(earlier(t))})
	}
	slices.SortFunc(ls, func(a, b lagged) int { return cmp.Or(cmp.Compare(b.lag, a.lag), strings.Compare(a.name, b.name)) })
	var out []string
	for _, l := range ls[:min(n, len(ls))] {
		out = append(out, fmt.Sprintf("%s (%s): %s", l.name, fmtDur(l.lag), r.runs[l.name].timeline()))
	}
	return out
}
