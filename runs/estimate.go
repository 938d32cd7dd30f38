package runs

import (
	"container/heap"
	"fmt"
	"time"
)

// Slot is one run of a queue as the start estimate sees it: the GPUs it
// holds or needs, its time limit, how long it has run and, where it
// reports it, how far it is (0 < Progress <= 1; 0: unknown) and how long
// it had run when it said so (ProgressAt; 0: Elapsed, said just now).
type Slot struct {
	Run        string
	GPUs       int64
	Limit      time.Duration // 0: none known
	Elapsed    time.Duration
	Progress   float64
	ProgressAt time.Duration
}

// Queue is one ClusterQueue's GPUs: its own (nominal) quota, how many
// more it may borrow from its cohort (-1: no limit), the runs that hold
// GPUs now, and the runs that wait, in Kueue's order. The estimate counts
// on the queue's own quota only: whether the cohort lends is not known
// ahead.
type Queue struct {
	Capacity   int64
	Borrowable int64
	Running    []Slot
	Waiting    []Slot
}

// Start is the estimate for one waiting run: In from now, or Never with
// the reason no quota can ever hold it, or Unknown when a run ahead has
// no time limit to reason from.
type Start struct {
	Run     string
	In      time.Duration
	Never   string
	Unknown string
}

// Known says whether the estimate is a time (In), not Never or Unknown.
func (s Start) Known() bool { return s.Never == "" && s.Unknown == "" }

// Text is the estimate as a person reads it: "starts in about 25 min",
// "will not start: ...", or "start time unknown: ...".
func (s Start) Text() string {
	switch {
	case s.Never != "":
		return "will not start: " + s.Never
	case s.Unknown != "":
		return "start time unknown: " + s.Unknown
	case s.In < time.Minute:
		return "starts within a minute"
	}
	return "starts in about " + About(s.In)
}

// About rounds d as a person says it: 7 min, 25 min, 1 h 40 min, 3 h.
func About(d time.Duration) string {
	m := int((d + 30*time.Second) / time.Minute)
	switch {
	case m < 60:
		return fmt.Sprintf("%d min", max(m, 1))
	case m >= 180:
		return fmt.Sprintf("%d h", (m+30)/60)
	}
	m = (m + 2) / 5 * 5 // to 5 minutes
	if m%60 == 0 {
		return fmt.Sprintf("%d h", m/60)
	}
	return fmt.Sprintf("%d h %d min", m/60, m%60)
}

// remaining is how much longer s runs: from its progress where it reports
// one (the pace it had when it said so, never past its limit), else the
// rest of its time limit, which bounds it from above.
func (s Slot) remaining() (time.Duration, bool) {
	rest := s.Limit - s.Elapsed
	if s.Progress > 0 && s.Progress <= 1 {
		at := s.ProgressAt
		if at <= 0 || at > s.Elapsed {
			at = s.Elapsed
		}
		// Past the end its pace foretold, it is slower than it said: only
		// its limit bounds it.
		byProgress := time.Duration(float64(at)/s.Progress) - s.Elapsed
		if byProgress > 0 && (s.Limit == 0 || byProgress < rest) {
			return byProgress, true
		}
	}
	if s.Limit == 0 {
		return 0, false
	}
	return max(rest, 0), true
}

// Estimate says when each waiting run starts if the runs ahead end as
// their limits or progress say and the waiting runs start in order, each
// once the GPUs it needs are free: Kueue's StrictFIFO, and an upper bound
// under BestEffortFIFO, where a smaller run may pass a larger one. Runs
// that end early, preemption and borrowing that comes and goes make the
// real start earlier or later; the board says "about".
func Estimate(q Queue) []Start {
	var ends endHeap
	free, unknown := q.Capacity, ""
	for _, r := range q.Running {
		free -= r.GPUs
		rest, ok := r.remaining()
		if !ok {
			unknown = "run " + r.Run + " ahead has no time limit"
			continue
		}
		ends = append(ends, end{rest, r.GPUs})
	}
	heap.Init(&ends)
	out := make([]Start, 0, len(q.Waiting))
	now := time.Duration(0)
	for _, w := range q.Waiting {
		s := Start{Run: w.Run}
		switch {
		case q.Borrowable >= 0 && w.GPUs > q.Capacity+q.Borrowable:
			s.Never = fmt.Sprintf("it needs %d GPUs and its queue's quota holds at most %d", w.GPUs, q.Capacity+q.Borrowable)
			out = append(out, s)
			continue
		case w.GPUs > q.Capacity:
			s.Unknown = fmt.Sprintf("it needs %d GPUs, more than its queue's own %d: it starts when the cohort lends the rest", w.GPUs, q.Capacity)
			out = append(out, s)
			continue
		case unknown != "":
			s.Unknown = unknown
			out = append(out, s)
			continue
		}
		for free < w.GPUs && ends.Len() > 0 {
			e := heap.Pop(&ends).(end)
			now = max(now, e.at)
			free += e.gpus
		}
		if free < w.GPUs { // the GPUs held without an end never come back
			s.Unknown = "the GPUs it needs are held by runs with no time limit"
			unknown = s.Unknown
			out = append(out, s)
			continue
		}
		s.In = now
		free -= w.GPUs
		if w.Limit > 0 {
			heap.Push(&ends, end{now + w.Limit, w.GPUs})
		} else {
			unknown = "run " + w.Run + " ahead has no time limit"
		}
		out = append(out, s)
	}
	return out
}

// end is when a run's GPUs come back, from now, and how many.
type end struct {
	at   time.Duration
	gpus int64
}

// endHeap holds the ends to come, the soonest first: a queue of n runs is
// estimated in O(n log n).
type endHeap []end

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(end)) }
func (h *endHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
