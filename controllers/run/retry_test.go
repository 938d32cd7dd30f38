package run

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The example tau.yaml retries Preempted, NodeLost and GPUFault, at most
// twice, after 30s, then 60s.

// failedAttemptJob is the attempt's Job r1-<attempt>, failed by the Job controller.
func failedAttemptJob(name string) *batchv1.Job {
	return job(builders.MakeJob(name, ns).Unsuspended().Condition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
}

// thirdAttempt is run r1 running its third attempt, r1-3, after two
// preempted ones.
func thirdAttempt() *taugridv1.TauRun {
	return builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").Workload("Job", "r1-3", "team-a-runs").
		Attempt("r1-1", sharedtest.Now.Add(-3*time.Hour), sharedtest.Now.Add(-2*time.Hour), taugridv1.FailurePreempted).
		Attempt("r1-2", sharedtest.Now.Add(-2*time.Hour), sharedtest.Now.Add(-time.Hour), taugridv1.FailurePreempted).
		Attempt("r1-3", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
}

// attemptEnd is what the tables read of an ended attempt.
type attemptEnd struct {
	Class string
	Nodes []string
	Ended bool
}

func endOf(a taugridv1.Attempt) attemptEnd {
	return attemptEnd{Class: a.FailureClass, Nodes: a.Nodes, Ended: a.EndTime != nil}
}

func TestFailedAttemptsAreClassifiedAndRetriedPerPolicy(t *testing.T) {
	exited := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Exited(1).Obj()
	cases := map[string]struct {
		objs     []client.Object
		phase    taugridv1.RunPhase
		message  string // its start
		ready    string // status/reason; "" when unset
		end      attemptEnd
		workload bool // status.workload still names the attempt's
		requeue  time.Duration
		events   []string
		gone     []client.Object // deleted by the reconcile
		kept     []client.Object
	}{
		"a container that exited 1 on a healthy node is the researcher's error: the run fails, not retried": {
			objs:  []client.Object{submitted(taugridv1.PhaseRunning), failedAttemptJob("r1-1"), workloadOf(true), exited, builders.MakeGPUNode("n1").Obj()},
			phase: taugridv1.PhaseFailed, message: "failed (UserError): container main exited with code 1", ready: "False/Failed",
			end: attemptEnd{Class: "UserError", Nodes: []string{"n1"}, Ended: true}, workload: true,
			events: []string{"Warning Failed"}, kept: []client.Object{failedAttemptJob("r1-1"), exited}},
		"a pod whose node is gone lost its node: retried after 30s, the run pending again": {
			objs: []client.Object{submitted(taugridv1.PhaseRunning), failedAttemptJob("r1-1"), workloadOf(true),
				builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n2").Running().Obj()},
			phase: taugridv1.PhasePending, message: "retrying in 30s (attempt 2 of 3) after failed (NodeLost): node n2 is gone",
			end: attemptEnd{Class: "NodeLost", Nodes: []string{"n2"}, Ended: true}, requeue: 30 * time.Second,
			events: []string{"Warning Retrying"},
			// The lost node's pod, still running in the API, holds nothing
			// any more; the failed Job is kept for the record.
			gone: []client.Object{builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).Obj()}, kept: []client.Object{failedAttemptJob("r1-1")}},
		"an exit on a GPU that threw an XID is a GPU fault, not the researcher's: retried": {
			objs: []client.Object{submitted(taugridv1.PhaseRunning), failedAttemptJob("r1-1"), workloadOf(true), exited,
				builders.MakeGPUNode("n1").GPUUnhealthy("XID 79: GPU has fallen off the bus").Obj()},
			phase: taugridv1.PhasePending, message: "retrying in 30s (attempt 2 of 3) after failed (GPUFault): node n1: XID 79",
			end: attemptEnd{Class: "GPUFault", Nodes: []string{"n1"}, Ended: true}, requeue: 30 * time.Second,
			events: []string{"Warning Retrying"}, kept: []client.Object{exited}},
		"the third attempt, the last the policy allows, lost its node: the run fails": {
			objs: []client.Object{thirdAttempt(), failedAttemptJob("r1-3"),
				builders.MakeAttemptPod("r1-3-0", ns, "r1", 3).OnNode("n2").Exited(1).Obj()},
			phase: taugridv1.PhaseFailed, message: "failed (NodeLost): node n2 is gone", ready: "False/Failed",
			end: attemptEnd{Class: "NodeLost", Nodes: []string{"n2"}, Ended: true}, workload: true,
			events: []string{"Warning Failed"}},
		"pods of earlier attempts say nothing of this one's failure": {
			objs: []client.Object{thirdAttempt(), failedAttemptJob("r1-3"), builders.MakeGPUNode("n1").Obj(),
				builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("gone-node").Exited(1).Obj(),
				builders.MakeAttemptPod("r1-3-0", ns, "r1", 3).OnNode("n1").Exited(2).Obj()},
			phase: taugridv1.PhaseFailed, message: "failed (UserError): container main exited with code 2", ready: "False/Failed",
			end: attemptEnd{Class: "UserError", Nodes: []string{"n1"}, Ended: true}, workload: true,
			events: []string{"Warning Failed"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, nil, tc.objs...)
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got := w.run(t, "r1")
			if got.Status.Phase != tc.phase || !strings.HasPrefix(got.Status.Message, tc.message) {
				t.Errorf("phase %q %q, want %q %q...", got.Status.Phase, got.Status.Message, tc.phase, tc.message)
			}
			if c := condition(got, taugridv1.ConditionReady); c != tc.ready {
				t.Errorf("Ready %q, want %q", c, tc.ready)
			}
			if diff := cmp.Diff(tc.end, endOf(lastAttempt(t, got))); diff != "" {
				t.Errorf("the attempt's end (-want +got):\n%s", diff)
			}
			if (got.Status.Workload != nil) != tc.workload {
				t.Errorf("status.workload %+v, want one: %v", got.Status.Workload, tc.workload)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			if got.Status.ObservedGeneration != got.Generation {
				t.Errorf("observedGeneration %d, want %d", got.Status.ObservedGeneration, got.Generation)
			}
			if diff := cmp.Diff(tc.events, w.reasons()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, o := range tc.gone {
				if w.holds(t, o) {
					t.Errorf("%T %s is still there", o, o.GetName())
				}
			}
			for _, o := range tc.kept {
				if !w.holds(t, o) {
					t.Errorf("%T %s was deleted", o, o.GetName())
				}
			}
		})
	}
}

// TestASecondRetryBacksOffLonger: the backoff doubles per attempt.
func TestASecondRetryBacksOffLonger(t *testing.T) {
	run := builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseRunning, "running").Workload("Job", "r1-2", "team-a-runs").
		Attempt("r1-1", sharedtest.Now.Add(-2*time.Hour), sharedtest.Now.Add(-time.Hour), taugridv1.FailurePreempted).
		Attempt("r1-2", sharedtest.Now.Add(-time.Hour), time.Time{}, "").Obj()
	w := newRunWorld(t, nil, run, failedAttemptJob("r1-2"), builders.MakeAttemptPod("r1-2-0", ns, "r1", 2).OnNode("n2").Exited(1).Obj())
	res, err := w.reconcile(t, "r1")
	if err != nil {
		t.Fatal(err)
	}
	got := w.run(t, "r1")
	if want := "retrying in 1m0s (attempt 3 of 3)"; !strings.HasPrefix(got.Status.Message, want) {
		t.Errorf("message %q, want %q...", got.Status.Message, want)
	}
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeue after %s, want the second backoff, 1m", res.RequeueAfter)
	}
}

// TestARetryAvoidsTheNodeThatFailedIt: a GPU fault or a lost node puts
// the node in the next attempt's avoided nodes; the next attempt is
// submitted once the backoff has passed, not before.
func TestARetryAvoidsTheNodeThatFailedIt(t *testing.T) {
	cases := map[string]struct {
		node  *corev1.Node // nil: the node is gone
		avoid []string
	}{
		"a GPU fault":  {node: builders.MakeGPUNode("n1").GPUUnhealthy("XID 48: double bit ECC error").Obj(), avoid: []string{"n1"}},
		"a lost node":  {avoid: []string{"n1"}},
		"a user error": {node: builders.MakeGPUNode("n1").Obj()}, // not retried: nothing submitted
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{submitted(taugridv1.PhaseRunning), failedAttemptJob("r1-1"),
				builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("n1").Exited(1).Obj()}
			if tc.node != nil {
				objs = append(objs, tc.node)
			}
			w := newRunWorld(t, nil, objs...)
			for _, step := range []time.Duration{0, 10 * time.Second, 21 * time.Second} {
				w.after(step)
				if _, err := w.reconcile(t, "r1"); err != nil {
					t.Fatal(err)
				}
				if step == 10*time.Second && len(w.jobs(t)) != 1 {
					t.Fatalf("%d Jobs 10s into a 30s backoff, want only the failed one", len(w.jobs(t)))
				}
			}
			next := &batchv1.Job{}
			err := w.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "r1-2"}, next)
			if tc.avoid == nil {
				if err == nil {
					t.Fatal("a run that is not retried submitted a second attempt")
				}
				return
			}
			if err != nil {
				t.Fatalf("the retry was not submitted after its backoff: %v (%s)", err, w.run(t, "r1").Status.Message)
			}
			if diff := cmp.Diff(tc.avoid, avoidedHosts(next)); diff != "" {
				t.Errorf("hosts the retry avoids (-want +got):\n%s", diff)
			}
			if n := len(w.run(t, "r1").Status.Attempts); n != 2 {
				t.Errorf("%d attempts recorded, want 2", n)
			}
		})
	}
}

// avoidedHosts are the hostnames every required node selector term of the
// Job's pods excludes.
func avoidedHosts(j *batchv1.Job) []string {
	a := j.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpNotIn {
				out = append(out, e.Values...)
			}
		}
	}
	return out
}
