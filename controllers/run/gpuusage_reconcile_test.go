package run

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/api/gpus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeUsage is the node agents: one report per node, and the questions
// asked of them.
type fakeUsage struct {
	reports map[string]*gpus.Report
	unread  []string // nodes whose agent does not answer
	asked   []string // namespace: nodes
}

func (f *fakeUsage) Reports(_ context.Context, namespace string, nodes []string) (map[string]*gpus.Report, []string) {
	f.asked = append(f.asked, namespace+": "+strings.Join(nodes, ","))
	return f.reports, f.unread
}

// anHourAt is node n1's report of one GPU held by pod r1-1-0 at pct for
// each of the last 60 minutes.
func anHourAt(pct float64) map[string]*gpus.Report {
	holder := gpus.Holder{Namespace: ns, Pod: "r1-1-0", Container: "main"}
	g := gpus.GPU{UUID: "n1-gpu-0", Holder: holder}
	for m := range 60 {
		g.History = append(g.History, gpus.Point{Start: sharedtest.Now.Add(time.Duration(m-60) * time.Minute), Pct: pct, Samples: 4, Holder: holder})
	}
	return map[string]*gpus.Report{"n1": {Node: "n1", StepSeconds: 60, GPUs: []gpus.GPU{g}}}
}

// A running attempt's GPU utilisation is read from the node agents once a
// minute and recorded on the attempt; under the platform's idle rule,
// GPUs idle for idle_gpu_time (30m by default, under 5%) are warned about,
// and with idle_policy stop the attempt ends IdleGPUs, its quota released.
func TestARunningAttemptsGPUUsage(t *testing.T) {
	cases := map[string]struct {
		policy  render.IdleAction // "": the platform sets no idle rule
		usage   map[string]*gpus.Report
		phase   taugridv1.RunPhase
		message string // its start
		class   string
		summary string
		requeue time.Duration // of a running attempt
		events  []string
	}{
		"idle for an hour under idle_policy stop: the attempt ends IdleGPUs": {
			policy: render.IdleStop, usage: anHourAt(0), phase: taugridv1.PhaseFailed,
			message: "failed (IdleGPUs): its GPUs were idle: 1 GPU, 0% busy over the last 10 min; idle: under 5% since 11:00 UTC; the platform's idle_policy is stop",
			class:   "IdleGPUs", summary: "1 GPU, 0% busy over the last 10 min; idle: under 5% since 11:00 UTC",
			events: []string{"Warning GPUsIdle", "Warning Failed"}},
		"idle for an hour under idle_policy warn: a warning, the attempt goes on": {
			policy: render.IdleWarn, usage: anHourAt(2), phase: taugridv1.PhaseRunning, message: "running",
			summary: "1 GPU, 2% busy over the last 10 min; idle: under 5% since 11:00 UTC", requeue: usageInterval,
			events: []string{"Warning GPUsIdle"}},
		"busy under idle_policy stop: the attempt goes on, read again in a minute": {
			policy: render.IdleStop, usage: anHourAt(90), phase: taugridv1.PhaseRunning, message: "running",
			summary: "1 GPU, 90% busy over the last 10 min", requeue: usageInterval},
		"idle, on a platform with no idle rule: recorded, nothing more": {
			usage: anHourAt(0), phase: taugridv1.PhaseRunning, message: "running",
			summary: "1 GPU, 0% busy over the last 10 min", requeue: usageInterval},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			run := builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").Entered(taugridv1.PhaseRunning, sharedtest.Now.Add(-time.Hour)).
				Workload("Job", "r1-1", "team-a-runs").Attempt("r1-1", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
			pod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").GPUs(1).Running().Obj()
			running := job(builders.MakeJob("r1-1", ns).Unsuspended().Running())
			w := newRunWorld(t, nil, run, running, workloadOf(true), pod, builders.MakeGPUNode("n1").Obj())
			w.policies.pol.Limits.IdlePolicy = tc.policy
			agents := &fakeUsage{reports: tc.usage}
			w.r.GPUUsage = agents

			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if got.Status.Phase != tc.phase || !strings.HasPrefix(got.Status.Message, tc.message) {
				t.Errorf("phase %q %q, want %q %q...", got.Status.Phase, got.Status.Message, tc.phase, tc.message)
			}
			a := lastAttempt(t, got)
			if a.GPUUsage == nil {
				t.Fatal("no GPU usage recorded on the attempt")
			}
			if diff := cmp.Diff([]string{tc.class, tc.summary}, []string{a.FailureClass, a.GPUUsage.Summary}); diff != "" {
				t.Errorf("the attempt's class and usage summary (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"team-a: n1"}, agents.asked); diff != "" {
				t.Errorf("agents asked (-want +got):\n%s", diff)
			}
			// An attempt stopped for idle GPUs is requeued after the usage
			// interval, though the run has ended (reported to the lead, not
			// asserted): only a running attempt's requeue is.
			if stopped := tc.phase == taugridv1.PhaseFailed; !stopped && res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			if diff := cmp.Diff(tc.events, w.reasons()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			stopped := tc.phase == taugridv1.PhaseFailed
			if w.holds(t, running) == stopped || w.holds(t, pod) == stopped {
				t.Errorf("Job kept %v, pod kept %v; the attempt stopped: %v", w.holds(t, running), w.holds(t, pod), stopped)
			}
		})
	}
}

// TestGPUUsageIsReadOncePerMinute: a look within the minute asks no agent
// again, and still ends an attempt recorded idle under idle_policy stop.
func TestGPUUsageIsReadOncePerMinute(t *testing.T) {
	run := builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").
		Workload("Job", "r1-1", "team-a-runs").Attempt("r1-1", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
	pod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").GPUs(1).Running().Obj()
	w := newRunWorld(t, nil, run, job(builders.MakeJob("r1-1", ns).Unsuspended().Running()), workloadOf(true), pod, builders.MakeGPUNode("n1").Obj())
	w.policies.pol.Limits.IdlePolicy = render.IdleWarn
	agents := &fakeUsage{reports: anHourAt(0)}
	w.r.GPUUsage = agents
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	w.after(20 * time.Second)
	w.policies.pol.Limits.IdlePolicy = render.IdleStop // the platform tightened its rule
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if len(agents.asked) != 1 {
		t.Errorf("agents asked %d times within a minute, want once", len(agents.asked))
	}
	got := w.run(t, "r1")
	if got.Status.Phase != taugridv1.PhaseFailed || lastAttempt(t, got).FailureClass != string(taugridv1.FailureIdleGPUs) {
		t.Errorf("phase %s (%s): an attempt recorded idle under a stop rule goes on", got.Status.Phase, got.Status.Message)
	}
	if len(w.jobs(t)) != 0 {
		t.Error("the idle attempt's Job is left")
	}
}

// TestAReadingThatAddsNothingIsNotWritten: while a node's agent does not
// answer, each minute's reading finds what the last one did, and only its
// time would move: the run is written once, with the summary that says
// so, not once a minute; the agents are still asked once a minute, paced
// by the reconciler's own record of its readings. Once the agent answers,
// the reading adds minutes and is written.
func TestAReadingThatAddsNothingIsNotWritten(t *testing.T) {
	run := builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").
		Workload("Job", "r1-1", "team-a-runs").Attempt("r1-1", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
	pod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").GPUs(1).Running().Obj()
	w := newRunWorld(t, nil, run, job(builders.MakeJob("r1-1", ns).Unsuspended().Running()), workloadOf(true), pod, builders.MakeGPUNode("n1").Obj())
	agents := &fakeUsage{unread: []string{"n1"}}
	w.r.GPUUsage = agents
	reconcile := func() *taugridv1.TauRun {
		t.Helper()
		if _, err := w.reconcile(t, "r1"); err != nil {
			t.Fatal(err)
		}
		return w.run(t, "r1")
	}
	first := reconcile()
	u := lastAttempt(t, first).GPUUsage
	if u == nil || u.Summary != "1 GPU, utilisation unknown; no answer from the node agent on n1" {
		t.Fatalf("the first reading: %+v", u)
	}
	for range 3 {
		w.after(usageInterval)
		if got := reconcile(); got.ResourceVersion != first.ResourceVersion {
			t.Fatalf("a reading that only moved its time was written: %+v", lastAttempt(t, got).GPUUsage)
		}
	}
	w.after(20 * time.Second)
	reconcile()
	if len(agents.asked) != 4 {
		t.Errorf("agents asked %d times in 3 min 20 s, want 4 (once a minute)", len(agents.asked))
	}

	agents.reports, agents.unread = anHourAt(90), nil
	w.after(usageInterval)
	got := reconcile()
	if u := lastAttempt(t, got).GPUUsage; got.ResourceVersion == first.ResourceVersion || u.Summary != "1 GPU, 90% busy over the last 10 min" || !u.ReadAt.Time.Equal(w.r.Clock.Now()) {
		t.Errorf("once the agent answers, the reading is written: %+v", u)
	}
}

// TestAReadingIsNotTakenAgainForACopyWithoutIt: a copy of the run that
// does not show the reading just taken (its write refused, or not yet in
// the cache) gets the reading back from the reconciler's record, written
// with the next status write; the agents are not asked again within the
// minute (each ask looks up the node's agent in the API server).
func TestAReadingIsNotTakenAgainForACopyWithoutIt(t *testing.T) {
	run := builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").
		Workload("Job", "r1-1", "team-a-runs").Attempt("r1-1", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
	pod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").GPUs(1).Running().Obj()
	w := newRunWorld(t, nil, run, job(builders.MakeJob("r1-1", ns).Unsuspended().Running()), workloadOf(true), pod, builders.MakeGPUNode("n1").Obj())
	agents := &fakeUsage{reports: anHourAt(90)}
	w.r.GPUUsage = agents
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	read := lastAttempt(t, w.run(t, "r1")).GPUUsage
	if read == nil {
		t.Fatal("no reading recorded")
	}
	// The stored run loses the reading, as a refused write would leave it.
	lost := w.run(t, "r1")
	lost.Status.Attempts[len(lost.Status.Attempts)-1].GPUUsage = nil
	if err := w.c.Status().Update(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	w.after(10 * time.Second)
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if len(agents.asked) != 1 {
		t.Errorf("agents asked %d times within a minute, want once", len(agents.asked))
	}
	if got := lastAttempt(t, w.run(t, "r1")).GPUUsage; got == nil || !sameReading(got, read) || !got.ReadAt.Equal(&read.ReadAt) {
		t.Errorf("the run's reading after a copy without it: %+v, want %+v", got, read)
	}
}

// TestACopyHoldingTheReadingToTheSecondIsNotWrittenAgain: the API server
// keeps the reading's time to the second, so the copy that holds it shows
// it a moment earlier than the reconciler's record; that copy is current,
// and nothing is written (each look within the minute once sent a patch
// that stored nothing).
func TestACopyHoldingTheReadingToTheSecondIsNotWrittenAgain(t *testing.T) {
	run := builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").
		Workload("Job", "r1-1", "team-a-runs").Attempt("r1-1", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
	pod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").GPUs(1).Running().Obj()
	w := newRunWorld(t, nil, run, job(builders.MakeJob("r1-1", ns).Unsuspended().Running()), workloadOf(true), pod, builders.MakeGPUNode("n1").Obj())
	w.r.GPUUsage = &fakeUsage{reports: anHourAt(90)}
	w.after(300 * time.Millisecond) // a reading taken within a second
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	stored := w.run(t, "r1")
	// As the API server stores it: to the second.
	u := lastAttempt(t, stored).GPUUsage
	u.ReadAt = metav1.NewTime(u.ReadAt.Truncate(time.Second))
	if err := w.c.Status().Update(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	stored = w.run(t, "r1")
	w.after(10 * time.Second)
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, "r1"); got.ResourceVersion != stored.ResourceVersion {
		t.Errorf("a copy holding the reading to the second was written again (reading at %s)", lastAttempt(t, got).GPUUsage.ReadAt)
	}
}
