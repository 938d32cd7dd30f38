package audit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/evidence"
	. "github.com/taugrid/taugrid/test/builders"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var t0 = sharedtest.Now.Add(-time.Hour)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

// logged is one entry as the test reads it back: what it decided, by
// whom, about which attempt.
type logged struct {
	Key, Decision, By string
	At                time.Time
}

// reconcileAndRead reconciles the run with a fresh log (as after a
// restart) on store, and reads the namespace's whole log back, checking
// that its chain holds.
func reconcileAndRead(t *testing.T, c client.Reader, store *evidence.FileStore, run string) ([]logged, []evidence.AuditEntry) {
	t.Helper()
	r := &AuditReconciler{Client: c, Log: &evidence.AuditLog{Store: store, Clock: sharedtest.Clock()}}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: run}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seqs, err := store.AuditSeqs(ctx, "team-a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var chain []evidence.StoredAuditEntry
	var got []logged
	var entries []evidence.AuditEntry
	for _, seq := range seqs {
		raw, err := store.AuditEntry(ctx, "team-a", seq)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, evidence.StoredAuditEntry{Seq: seq, Raw: string(raw)})
		var e evidence.AuditEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
		got = append(got, logged{Key: e.Key, Decision: e.Decision, By: e.By, At: e.At})
	}
	if breaks := evidence.VerifyAuditChain(chain); len(breaks) != 0 {
		t.Fatalf("the controller's log does not verify: %+v", breaks)
	}
	return got, entries
}

// TestARunsLifeIsLoggedOnceInTheOrderItWasDecided: a signed run that Kueue
// admitted through an admission check, another team's run preempted, and
// the retry policy ran again to success. Every decision is in the log,
// once, however often the run is reconciled, restarts included; the
// preemptor is described by its priority, never named.
func TestARunsLifeIsLoggedOnceInTheOrderItWasDecided(t *testing.T) {
	preemption := "Preempted to accommodate a workload (UID: wl-b, JobUID: job-b) due to prioritization in the ClusterQueue; preemptor path: /gpu"
	run := MakeTauRun("research-1a2b", "team-a").UID("uid-1").Created(t0).RequestedBy("alice@example.com").
		SignedBy("alice@example.com", "SHA256:abc").PolicyAt("feedfacefeedfacefeedfacefeedfacefeedface").
		RenderedFrom("tau.yaml", "sha256:c0ffee", "sha256:d1e7").
		Entered(taugridv1.PhasePending, at(0)).Entered(taugridv1.PhaseQueued, at(1)).Entered(taugridv1.PhaseAdmitted, at(2)).
		Entered(taugridv1.PhaseRunning, at(3)).Entered(taugridv1.PhasePending, at(10)).Entered(taugridv1.PhaseQueued, at(11)).
		Entered(taugridv1.PhaseAdmitted, at(12)).Entered(taugridv1.PhaseSucceeded, at(30)).
		Attempt("research-1a2b-1", at(3), at(9), "Preempted").Preempted(preemption, at(9)).
		Attempt("research-1a2b-2", at(13), at(30), "").
		Workload("Job", "research-1a2b-2", "gpu-queue").
		Phase(taugridv1.PhaseSucceeded, "finished in 17m").Obj()
	second := MakeWorkload("job-research-1a2b-2", "team-a").ControlledByJob("research-1a2b-2").
		AdmissionCheck("policy", kueue.CheckStateReady, "policy holds", at(12)).AdmittedBy("gpu", at(12)).Obj()
	other := MakeWorkload("job-big-1", "team-b").ControlledByJob("big-1").JobUIDLabel("job-b").Priority(1000).Obj()
	c := sharedtest.NewClient(run, second, other)
	store, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	got, entries := reconcileAndRead(t, c, store, run.Name)
	again, _ := reconcileAndRead(t, c, store, run.Name)

	want := []logged{
		{"requested", "requested", "alice@example.com", t0},
		{"signed", "signed", "alice@example.com", t0},
		{"rendered", "rendered", "platform policy feedfacefeed", at(1)},
		{"submitted#1", "submitted", "TauGrid", at(1)},
		{"admitted#1", "admitted", "Kueue", at(2)},
		{"preempted#1", "preempted", "a run of another team (priority 1000)", at(9)},
		{"ended#1", "ended", "", at(9)},
		{"retried#2", "retried", "the run's retry policy", at(11)},
		{"submitted#2", "submitted", "TauGrid", at(11)},
		{"check#2/policy=Ready", "check", "admission check policy", at(12)},
		{"admitted#2", "admitted", "ClusterQueue gpu", at(12)},
		{"ended#2", "ended", "", at(30)},
		{"outcome", "outcome", "", at(30)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the log (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("after a second reconcile by a restarted controller (-want +got):\n%s", diff)
	}
	for _, e := range entries {
		if strings.Contains(e.Message+e.By, "team-b") || strings.Contains(e.Message+e.By, "big-1") || strings.Contains(e.Message, "job-b") {
			t.Errorf("entry %s names another team's run: %s / %s", e.Key, e.By, e.Message)
		}
	}
	rendered := entries[2].Facts
	if rendered["policy_commit"] != "feedfacefeedfacefeedfacefeedfacefeedface" || rendered["config_digest"] != "sha256:c0ffee" || rendered["policy_digest"] != "sha256:d1e7" {
		t.Errorf("rendered facts = %v, want the policy commit and the digests", rendered)
	}
	if f := entries[3].Facts; f["workload"] != "research-1a2b-1" {
		t.Errorf("submitted#1 facts = %v", f)
	}
}

// TestKueueRejectingAnAttemptIsLoggedWithItsCheckAndWhy: an admission
// check that rejects the attempt is the decision, with its message.
func TestKueueRejectingAnAttemptIsLoggedWithItsCheckAndWhy(t *testing.T) {
	run := MakeTauRun("research-9z", "team-a").UID("uid-9").Created(t0).Entered(taugridv1.PhaseQueued, at(1)).
		Attempt("research-9z-1", time.Time{}, time.Time{}, "").Workload("Job", "research-9z-1", "gpu-queue").
		Phase(taugridv1.PhaseQueued, "submitted to queue gpu-queue").Obj()
	wl := MakeWorkload("job-research-9z-1", "team-a").ControlledByJob("research-9z-1").
		AdmissionCheck("budget", kueue.CheckStateRejected, "team-a is over its monthly GPU hours", at(2)).
		AdmissionCheck("policy", kueue.CheckStatePending, "", at(1)).Obj()
	store, _ := evidence.NewFileStore(t.TempDir())
	_, entries := reconcileAndRead(t, sharedtest.NewClient(run, wl), store, run.Name)
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	if diff := cmp.Diff([]string{"requested", "submitted#1", "check#1/budget=Rejected"}, keys); diff != "" {
		t.Fatalf("keys (-want +got):\n%s", diff)
	}
	rej := entries[2]
	if rej.Decision != "rejected" || rej.By != "admission check budget" ||
		rej.Message != "attempt 1 rejected by admission check budget: team-a is over its monthly GPU hours" {
		t.Errorf("rejection = %s by %q: %q", rej.Decision, rej.By, rej.Message)
	}
	if by := entries[0].By; by != "unknown: git recorded no tagger or pusher" {
		t.Errorf("a run without a requester is requested by %q", by)
	}
}

// TestTauGridsRefusalIsLoggedOnceKueueResetTheCheck: Kueue resets a
// rejected check to Pending as it deactivates the workload; the refusal
// TauGrid's check left on the workload is logged.
func TestTauGridsRefusalIsLoggedOnceKueueResetTheCheck(t *testing.T) {
	run := MakeTauRun("research-8y", "team-a").UID("uid-8").Created(t0).Entered(taugridv1.PhaseQueued, at(1)).
		Attempt("research-8y-1", time.Time{}, time.Time{}, "").Workload("Job", "research-8y-1", "gpu-queue").
		Phase(taugridv1.PhaseQueued, "submitted to queue gpu-queue").Obj()
	wl := MakeWorkload("job-research-8y-1", "team-a").ControlledByJob("research-8y-1").
		AdmissionCheck("taugrid-policy-default", kueue.CheckStatePending, "Reset to Pending after eviction. Previously: Rejected", at(2)).Obj()
	wl.Annotations = map[string]string{taugridv1.AnnotationAdmissionRefusal: "TauGrid policy: Job research-8y-1 changed after TauGrid rendered it: spec.parallelism"}
	store, _ := evidence.NewFileStore(t.TempDir())
	_, entries := reconcileAndRead(t, sharedtest.NewClient(run, wl), store, run.Name)
	if len(entries) != 3 || entries[2].Decision != "rejected" ||
		entries[2].Message != "attempt 1 rejected at admission: TauGrid policy: Job research-8y-1 changed after TauGrid rendered it: spec.parallelism" {
		t.Fatalf("entries %+v; want the refusal logged third", entries)
	}
}

// TestAResumedAndCancelledRunSaysWhoAskedForEach: a resume request that
// came after the first attempt failed started the second; the run's ref
// was then deleted.
func TestAResumedAndCancelledRunSaysWhoAskedForEach(t *testing.T) {
	resume := at(20).Format(time.RFC3339Nano)
	run := MakeTauRun("research-3c", "team-a").UID("uid-3").Created(t0).
		Entered(taugridv1.PhaseQueued, at(1)).Entered(taugridv1.PhaseFailed, at(10)).Entered(taugridv1.PhasePending, at(20)).
		Entered(taugridv1.PhaseQueued, at(21)).Entered(taugridv1.PhaseCancelled, at(25)).
		Attempt("research-3c-1", at(2), at(10), "UserError").Attempt("research-3c-2", time.Time{}, at(25), "").
		ResumeHandled(resume).Cancel().Phase(taugridv1.PhaseCancelled, "cancelled: its run ref or tag was deleted").Obj()
	store, _ := evidence.NewFileStore(t.TempDir())
	got, entries := reconcileAndRead(t, sharedtest.NewClient(run), store, run.Name)
	want := []logged{
		{"requested", "requested", "unknown: git recorded no tagger or pusher", t0},
		{"submitted#1", "submitted", "TauGrid", at(1)},
		{"admitted#1", "admitted", "Kueue", time.Time{}},
		{"ended#1", "ended", "", at(10)},
		{"resumed@" + resume, "resumed", "a resume request (annotation taugrid.dev/resume)", at(20)},
		{"retried#2", "retried", "a resume request (annotation taugrid.dev/resume)", at(21)},
		{"submitted#2", "submitted", "TauGrid", at(21)},
		{"ended#2", "ended", "", at(25)},
		{"cancelled", "cancelled", "git: its run ref or tag was deleted", at(25)},
		{"outcome", "outcome", "", at(25)},
	}
	// An entry the run gives no time for is dated when the log saw it.
	want[2].At = entries[2].Recorded
	if entries[2].Recorded != sharedtest.Now {
		t.Errorf("recorded at %s, want the clock's now", entries[2].Recorded)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the log (-want +got):\n%s", diff)
	}
}
