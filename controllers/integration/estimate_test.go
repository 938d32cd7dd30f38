package integration

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// estimateLine is the long explanation's estimate (runs/explain.go).
var estimateLine = regexp.MustCompile(`Estimate: starts about (\d{4}-\d\d-\d\d \d\d:\d\d UTC)`)

// estimateError is how far one run's estimated starts fell from its real
// start: the estimate shown when it was pushed and the last one shown
// before it started, by the commit status (the controller) and by the
// board (runs.ReportQueueAt). Positive: the estimate was late.
type estimateError struct {
	run                                  string
	startedAt                            time.Time
	pushed, last, boardPushed, boardLast time.Duration
}

// playQueue pushes one run per fraction, of the example research
// repository's default target (one GPU, a 2-hour limit), at once into
// tenant prefix-a's queue cut to gpus GPUs, then plays the queue on the
// run reconciler's clock: each run, once Kueue admits it, starts at once
// and ends after its share of its time limit (fractions[i] for the i-th
// run admitted). It returns the estimate errors of each run that waited,
// in the order they started. With reports, each running run reports its
// progress, at a steady pace, before every look.
func playQueue(t *testing.T, prefix string, gpus string, fractions []float64, reports bool) []estimateError {
	t.Helper()
	f := newRunFixture(t, prefix)
	clock := f.runRec.Clock.(*clocktesting.FakePassiveClock)
	setGPUQuota(t, f.ns, gpus, "0")
	// Pushed one after another, each once the one before has its Workload
	// and a second has passed, so that each Workload is created in its own
	// second: Kueue orders the runs of one priority by creation time and
	// leaves a tie within a second to chance (its heap), which no estimate
	// can foresee.
	for i := range fractions {
		ref := fmt.Sprintf("r%d", i)
		f.research.runRef(ref, "target: default\n")
		f.poll(t)
		f.reconcileOnce(t, f.runOf(t, "refs/tau/runs/"+ref).Name) // submits it
		deadline := time.Now().Add(30 * time.Second)
		for {
			var wls kueue.WorkloadList
			if err := k8s.List(context.Background(), &wls, client.InNamespace(f.ns)); err != nil {
				t.Fatal(err)
			}
			if len(wls.Items) == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Kueue made %d Workloads for %d Jobs", len(wls.Items), i+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second)
	}
	const limit = 2 * time.Hour // the example's default target
	type state struct {
		name                  string
		startAt, endAt        time.Time // zero: not started; ended
		first, last           time.Time // the commit status's estimates
		boardFirst, boardLast time.Time // the board's
	}
	var all []*state
	for _, r := range f.listRuns(t) {
		all = append(all, &state{name: r.Name})
	}
	admitted := 0
	// start reconciles every waiting run once; those Kueue admitted start
	// now. It says whether any did.
	start := func() bool {
		now, any := clock.Now(), false
		for _, s := range all {
			if !s.startAt.IsZero() {
				continue
			}
			if run := f.reconcileOnce(t, s.name); run.Status.Phase == taugridv1.PhaseAdmitted {
				started := metav1.NewTime(now)
				setJobStatus(t, f.ns, render.WorkloadName(s.name, 1), "starting", func(st *batchv1.JobStatus) { st.StartTime = &started })
				s.startAt, s.endAt = now, now.Add(time.Duration(fractions[admitted]*float64(limit)).Truncate(time.Second))
				admitted++
				any = true
			}
		}
		return any
	}
	// look records the estimates each waiting run shows once the queue
	// has settled (every admitted run started): on its commit status and
	// on the board.
	look := func() {
		now := clock.Now()
		for _, s := range all {
			if !reports || s.startAt.IsZero() || s.endAt.IsZero() {
				continue
			}
			// What the progress endpoint writes (server.Progress).
			done := int32(100 * now.Sub(s.startAt) / s.endAt.Sub(s.startAt))
			patch := fmt.Sprintf(`{"status":{"progress":{"attempt":1,"percent":%d,"time":%q}}}`, done, now.UTC().Format(time.RFC3339))
			run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: s.name}}
			if err := k8s.Status().Patch(context.Background(), run, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
		shown := map[*state]time.Time{}
		for _, s := range all {
			if !s.startAt.IsZero() {
				continue
			}
			run := f.reconcileOnce(t, s.name)
			if run.Status.Phase != taugridv1.PhaseQueued {
				t.Fatalf("run %s is %s while the queue is settled: %s", s.name, run.Status.Phase, run.Status.Message)
			}
			if m := estimateLine.FindStringSubmatch(run.Status.Workload.Reason); m != nil {
				at, err := time.Parse("2006-01-02 15:04 MST", m[1])
				if err != nil {
					t.Fatal(err)
				}
				shown[s] = at
			}
		}
		rep, err := runs.ReportQueueAt(context.Background(), k8s, f.ns, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if at, ok := shown[s]; ok {
				if s.first.IsZero() {
					s.first = at
				}
				s.last = at
			}
			for _, q := range rep.Runs {
				if s.name == q.Run && s.startAt.IsZero() && q.StartsAt != nil {
					if s.boardFirst.IsZero() {
						s.boardFirst = *q.StartsAt
					}
					s.boardLast = *q.StartsAt
				}
			}
		}
	}
	// until starts runs as Kueue admits them, in its own time, until n
	// have started.
	until := func(n int, what string) {
		deadline := time.Now().Add(30 * time.Second)
		for admitted < n {
			start()
			if time.Now().After(deadline) {
				t.Fatalf("%d runs admitted %s, want %d", admitted, what, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	capacity := resource.MustParse(gpus)
	until(min(len(all), int(capacity.Value())), "at first")
	look()
	for admitted < len(all) {
		// The next end: the clock goes to it and that run's Job ends.
		var next *state
		for _, s := range all {
			if !s.endAt.IsZero() && (next == nil || s.endAt.Before(next.endAt)) {
				next = s
			}
		}
		// A look halfway there too, where the runs ahead are well under
		// way (and, reporting, say how far).
		clock.SetTime(clock.Now().Add(next.endAt.Sub(clock.Now()) / 2))
		look()
		clock.SetTime(next.endAt)
		setJobStatus(t, f.ns, render.WorkloadName(next.name, 1), "completing", func(st *batchv1.JobStatus) {
			start := *st.StartTime // set when it started, on the same clock
			completed(st)
			end := metav1.NewTime(next.endAt)
			st.StartTime, st.CompletionTime = &start, &end
		})
		f.reconcileRun(t, next.name, taugridv1.PhaseSucceeded)
		next.endAt = time.Time{}
		until(admitted+1, "after "+next.name+" ended")
		if start() {
			t.Fatalf("two runs admitted after %s ended: one GPU was freed", next.name)
		}
		look()
	}
	var out []estimateError
	for _, s := range all {
		if s.first.IsZero() {
			continue // admitted at once: nothing to estimate
		}
		e := estimateError{run: s.name, startedAt: s.startAt, pushed: s.first.Sub(s.startAt), last: s.last.Sub(s.startAt)}
		if !s.boardFirst.IsZero() {
			e.boardPushed, e.boardLast = s.boardFirst.Sub(s.startAt), s.boardLast.Sub(s.startAt)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].startedAt.Before(out[j].startedAt) })
	return out
}

// The start estimate, measured after the fact on the example's queue:
// runs of the default target (one GPU, a 2-hour limit) pushed at once
// into a queue cut to two GPUs. Runs that use their whole limit start
// when the estimate said, to the minute; runs that end early start
// sooner, never later, than any estimate said: the estimate is an upper
// bound, and each end brings the shown estimate closer. Runs that report
// their progress bring it to their real ends.
func TestTheStartEstimateIsMeasuredAfterTheFact(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prefix    string
		fractions []float64
		reports   bool
	}{
		{"every run uses its whole limit", "es1", []float64{1, 1, 1, 1, 1, 1}, false},
		{"runs end at 40-100% of their limits", "es2", []float64{0.9, 0.4, 0.7, 1, 0.55, 0.8}, false},
		{"runs end at 40-100% of their limits and report their progress", "es3", []float64{0.9, 0.4, 0.7, 1, 0.55, 0.8}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := playQueue(t, tc.prefix, "2", tc.fractions, tc.reports)
			if len(errs) != len(tc.fractions)-2 {
				t.Fatalf("%d runs had an estimate, want %d (all but the two admitted at once)", len(errs), len(tc.fractions)-2)
			}
			var table strings.Builder
			var sum, worst [4]time.Duration
			for _, e := range errs {
				all := [4]time.Duration{e.pushed, e.last, e.boardPushed, e.boardLast}
				fmt.Fprintf(&table, "\n  started +%-7s commit status: when pushed %+8s, last shown %+8s; board: when pushed %+8s, last shown %+8s",
					e.startedAt.Sub(errs[0].startedAt).Round(time.Minute), all[0].Round(time.Minute), all[1].Round(time.Minute), all[2].Round(time.Minute), all[3].Round(time.Minute))
				// Runs end by their limits: no run starts later than an
				// estimate said (the commit status shows minutes).
				for _, d := range all {
					if d < -time.Minute {
						t.Errorf("%s started after its estimate: %s", e.run, all)
					}
				}
				if e.last > e.pushed+time.Minute || e.boardLast > e.boardPushed+time.Minute {
					t.Errorf("%s: the last estimate is further off than the first: %s", e.run, all)
				}
				for i, d := range all {
					sum[i] += d.Abs()
					worst[i] = max(worst[i], d.Abs())
				}
			}
			n := time.Duration(len(errs))
			t.Logf("%s: start estimate error, mean (max); commit status: when pushed %s (%s), last shown %s (%s); board: when pushed %s (%s), last shown %s (%s):%s", tc.name,
				(sum[0] / n).Round(time.Minute), worst[0].Round(time.Minute), (sum[1] / n).Round(time.Minute), worst[1].Round(time.Minute),
				(sum[2] / n).Round(time.Minute), worst[2].Round(time.Minute), (sum[3] / n).Round(time.Minute), worst[3].Round(time.Minute), table.String())
			// Runs that report a steady pace: by halfway through the runs
			// ahead, the estimate knows when they end.
			if tc.reports && (worst[1] > 2*time.Minute || worst[3] > 2*time.Minute) {
				t.Errorf("runs that report their progress: the last estimate is off by up to %s (status) and %s (board), want within 2 minutes", worst[1], worst[3])
			}
			if tc.fractions[0] == 1 && (worst[0] > time.Minute || worst[2] > time.Minute) {
				t.Errorf("runs that use their whole limits: the estimate is off by up to %s (status) and %s (board), want within the minute", worst[0], worst[2])
			}
		})
	}
}
