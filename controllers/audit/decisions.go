package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Observed is what one reconcile read about a run: the run, the Kueue
// Workloads of its attempts that still exist, and what preempted them.
type Observed struct {
	Run *taugridv1.TauRun
	// Workloads by attempt number.
	Workloads map[int]*kueue.Workload
	// Preemptors by attempt number, for attempts recorded as preempted.
	Preemptors map[int]Preemptor
}

// Preemptor is what preempted an attempt, in the words the run's team may
// read: its own runs by name, another team's never.
type Preemptor struct {
	// Words: "run team-a/big-7f3k2", "a run of another team", "a workload
	// that is gone".
	Words    string
	Priority *int32
	// Reason is Kueue's: "prioritization in the ClusterQueue", ...
	Reason string
}

// digestFields are the run status's digests of what was rendered, as a
// rendered entry records them: a new digest on the status is one more line.
var digestFields = []struct {
	name string
	of   func(*taugridv1.TauRunStatus) string
}{
	{"tau_file", func(s *taugridv1.TauRunStatus) string { return s.TauFile }},
	{"config_digest", func(s *taugridv1.TauRunStatus) string { return s.ConfigDigest }},
	{"policy_commit", func(s *taugridv1.TauRunStatus) string { return s.PolicyCommit }},
	{"policy_digest", func(s *taugridv1.TauRunStatus) string { return s.PolicyDigest }},
	{"source_digest", func(s *taugridv1.TauRunStatus) string { return s.SourceDigest }},
}

// Decisions are the run's decisions so far, in the order they were made,
// each under a key that names it stably: a later reconcile computes the
// same keys, and the log writes only those it does not hold. Every one is
// read off the run's status or its Workloads; what they do not show is
// not written. An entry whose time the run does not record has a zero At,
// which the log fills with the time it saw it.
func Decisions(o Observed) []evidence.AuditEntry {
	run := o.Run
	out := []evidence.AuditEntry{requested(run)}
	if s := run.Status.Signature; s != nil {
		out = append(out, signed(run, s))
	}
	if len(run.Status.Attempts) > 0 || run.Status.Phase.Final() {
		if e, ok := rendered(run); ok {
			out = append(out, e)
		}
	}
	for i := range run.Status.Attempts {
		out = append(out, attemptDecisions(o, i)...)
	}
	if v := run.Status.LastHandledResume; v != "" {
		out = withResume(out, resumed(run, v))
	}
	if run.Spec.Cancel {
		out = append(out, cancelled(run))
	}
	if run.Status.Phase.Final() {
		out = append(out, outcome(run))
	}
	for i := range out {
		out[i].Run, out[i].RunUID = run.Name, string(run.UID)
	}
	return out
}

func requested(run *taugridv1.TauRun) evidence.AuditEntry {
	t := run.Spec.Trigger
	by := t.Requester
	if by == "" {
		by = "unknown: git recorded no tagger or pusher"
	}
	return evidence.AuditEntry{Key: "requested", Decision: "requested", At: run.CreationTimestamp.UTC(), By: by,
		Message: fmt.Sprintf("requested by %s: %s %s at commit %s, target %s", by, t.Kind, t.Ref, short(run.Spec.Commit), run.Spec.Target),
		Facts: map[string]string{"repository": run.Spec.Repository, "trigger": string(t.Kind), "ref": t.Ref,
			"commit": run.Spec.Commit, "target": run.Spec.Target}}
}

// signed records the check of the signature on the run's tag or commit,
// made before the run was created.
func signed(run *taugridv1.TauRun, s *taugridv1.SignatureStatus) evidence.AuditEntry {
	e := evidence.AuditEntry{Key: "signed", Decision: "signed", At: run.CreationTimestamp.UTC(), By: s.Principal,
		Facts: map[string]string{"verified": fmt.Sprint(s.Verified), "method": s.Method, "fingerprint": s.Fingerprint, "object": s.Object}}
	if s.Verified {
		e.Message = fmt.Sprintf("%s signed by %s (%s key %s)", s.Object, s.Principal, s.Method, s.Fingerprint)
	} else {
		e.Decision, e.Message = "refused", "signature refused: "+s.Reason
	}
	return e
}

// rendered records what the run was rendered from, once it was
// submitted or refused: the tau file, the policy commit and the digests.
func rendered(run *taugridv1.TauRun) (evidence.AuditEntry, bool) {
	facts := map[string]string{}
	for _, f := range digestFields {
		if v := f.of(&run.Status); v != "" {
			facts[f.name] = v
		}
	}
	if len(facts) == 0 {
		return evidence.AuditEntry{}, false
	}
	msg := fmt.Sprintf("rendered %s under platform policy %s", facts["tau_file"], short(facts["policy_commit"]))
	return evidence.AuditEntry{Key: "rendered", Decision: "rendered", At: phaseAt(run, taugridv1.PhaseQueued, 1),
		By: "platform policy " + short(facts["policy_commit"]), Message: msg, Facts: facts}, true
}

// resumed records a handled resume request (tau resume sets the
// annotation to the time it asked).
func resumed(run *taugridv1.TauRun, value string) evidence.AuditEntry {
	at, _ := time.Parse(time.RFC3339Nano, value)
	return evidence.AuditEntry{Key: "resumed@" + value, Decision: "resumed", At: at.UTC(),
		By:      "a resume request (annotation " + taugridv1.AnnotationResume + ")",
		Message: "resume requested at " + value + ": the failed run was reopened for a new attempt"}
}

// withResume puts the resume request before the attempt it started, or
// last while that attempt is not submitted yet.
func withResume(out []evidence.AuditEntry, e evidence.AuditEntry) []evidence.AuditEntry {
	i := slices.IndexFunc(out, func(d evidence.AuditEntry) bool { return d.Decision == "retried" && d.By == e.By })
	if i < 0 {
		return append(out, e)
	}
	return slices.Insert(out, i, e)
}

// cancelled records the run's cancellation: the repository reconciler
// sets spec.cancel when the run's ref or tag is deleted.
func cancelled(run *taugridv1.TauRun) evidence.AuditEntry {
	return evidence.AuditEntry{Key: "cancelled", Decision: "cancelled", At: phaseAt(run, taugridv1.PhaseCancelled, 1),
		By: "git: its run ref or tag was deleted", Message: "cancel requested: the run's ref or tag was deleted from the repository"}
}

func outcome(run *taugridv1.TauRun) evidence.AuditEntry {
	e := evidence.AuditEntry{Key: "outcome", Decision: "outcome", At: phaseAt(run, run.Status.Phase, -1),
		Message: strings.ToLower(string(run.Status.Phase)) + ": " + run.Status.Message,
		Facts:   map[string]string{"phase": string(run.Status.Phase)}}
	if c := apimeta.FindStatusCondition(run.Status.Conditions, taugridv1.ConditionStalled); c != nil && c.Status == "True" {
		e.Facts["reason"] = c.Reason
	}
	return e
}

// phaseAt is when the run entered phase for the nth time (from 1), or the
// last time for n = -1; zero when it has not.
func phaseAt(run *taugridv1.TauRun, phase taugridv1.RunPhase, n int) time.Time {
	var times []time.Time
	for _, p := range run.Status.Phases {
		if p.Phase == phase {
			times = append(times, p.Time.UTC())
		}
	}
	switch {
	case len(times) == 0:
		return time.Time{}
	case n < 0:
		return times[len(times)-1]
	case n <= len(times):
		return times[n-1]
	}
	return time.Time{}
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// sortedChecks are a Workload's admission checks by name.
func sortedChecks(wl *kueue.Workload) []kueue.AdmissionCheckState {
	return slices.SortedFunc(slices.Values(wl.Status.AdmissionChecks), func(a, b kueue.AdmissionCheckState) int {
		return strings.Compare(string(a.Name), string(b.Name))
	})
}
