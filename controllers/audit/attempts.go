package audit

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// attemptDecisions are attempt i's decisions: how it came to be (retried
// or resumed), its submission, Kueue's admission and admission checks,
// its preemption and its end.
func attemptDecisions(o Observed, i int) []evidence.AuditEntry {
	run, a := o.Run, o.Run.Status.Attempts[i]
	n := a.Number
	var out []evidence.AuditEntry
	if i > 0 {
		out = append(out, retried(run, i))
	}
	out = append(out, submitted(run, a, o.Workloads[n]))
	if wl := o.Workloads[n]; wl != nil {
		out = append(out, checks(n, wl)...)
	}
	if e, ok := admitted(run, a, o.Workloads[n]); ok {
		out = append(out, e)
	}
	if p := a.Preemption; p != nil {
		out = append(out, preempted(n, p, o.Preemptors[n]))
	}
	if a.EndTime != nil {
		msg := "attempt " + strconv.Itoa(n) + " ended"
		if a.FailureClass != "" {
			msg += " " + a.FailureClass
		}
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		out = append(out, evidence.AuditEntry{Key: key("ended", n), Decision: "ended", Attempt: n, At: a.EndTime.UTC(),
			Message: msg, Facts: map[string]string{"failure_class": a.FailureClass}})
	}
	return out
}

func key(decision string, attempt int) string { return decision + "#" + strconv.Itoa(attempt) }

// retried says who started attempt i (from 0, > 0): a resume request
// handled after the attempt before it ended, else the run's retry policy.
func retried(run *taugridv1.TauRun, i int) evidence.AuditEntry {
	prev, n := run.Status.Attempts[i-1], run.Status.Attempts[i].Number
	e := evidence.AuditEntry{Key: key("retried", n), Decision: "retried", Attempt: n, At: phaseAt(run, taugridv1.PhaseQueued, i+1),
		By: "the run's retry policy", Message: fmt.Sprintf("attempt %d started after attempt %d ended %s", n, prev.Number, prev.FailureClass)}
	resume, err := time.Parse(time.RFC3339Nano, run.Status.LastHandledResume)
	if err == nil && prev.EndTime != nil && resume.After(prev.EndTime.Time) && (e.At.IsZero() || !resume.After(e.At)) {
		e.By = "a resume request (annotation " + taugridv1.AnnotationResume + ")"
		e.Message = fmt.Sprintf("attempt %d started by request after attempt %d ended %s", n, prev.Number, prev.FailureClass)
	}
	return e
}

func submitted(run *taugridv1.TauRun, a taugridv1.Attempt, wl *kueue.Workload) evidence.AuditEntry {
	queue, facts := "", map[string]string{"workload": a.Workload}
	if w := run.Status.Workload; w != nil && w.Name == a.Workload {
		queue = w.Queue
		// What the admission check holds the workload to.
		if w.UID != "" {
			facts["workload_uid"], facts["rendered_digest"] = string(w.UID), w.Digest
		}
	}
	if wl != nil && queue == "" {
		queue = string(wl.Spec.QueueName)
	}
	facts["local_queue"] = queue
	return evidence.AuditEntry{Key: key("submitted", a.Number), Decision: "submitted", Attempt: a.Number,
		At: phaseAt(run, taugridv1.PhaseQueued, a.Number), By: "TauGrid",
		Message: fmt.Sprintf("attempt %d submitted to Kueue as %s, queued in LocalQueue %s", a.Number, a.Workload, queue),
		Facts:   facts}
}

// admitted is Kueue's admission of the attempt, by its ClusterQueue, as
// its Workload shows it; or, once the Workload is gone, as the run
// recorded it.
func admitted(run *taugridv1.TauRun, a taugridv1.Attempt, wl *kueue.Workload) (evidence.AuditEntry, bool) {
	e := evidence.AuditEntry{Key: key("admitted", a.Number), Decision: "admitted", Attempt: a.Number, By: "Kueue"}
	switch {
	case wl != nil && wl.Status.Admission != nil && admittedNow(wl):
		cq := string(wl.Status.Admission.ClusterQueue)
		e.By, e.Facts = "ClusterQueue "+cq, map[string]string{"cluster_queue": cq}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil {
			e.At = c.LastTransitionTime.UTC()
		}
		e.Message = fmt.Sprintf("attempt %d admitted by ClusterQueue %s", a.Number, cq)
		for _, c := range sortedChecks(wl) {
			e.Facts["check/"+string(c.Name)] = string(c.State)
		}
		return e, true
	case run.Status.Workload != nil && run.Status.Workload.Name == a.Workload && run.Status.Workload.Admitted,
		a.StartTime != nil:
		e.At = phaseAt(run, taugridv1.PhaseAdmitted, a.Number)
		e.Message = fmt.Sprintf("attempt %d admitted by Kueue", a.Number)
		return e, true
	}
	return e, false
}

func admittedNow(wl *kueue.Workload) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
}

// checks are the admission checks' verdicts on the attempt's Workload:
// each state a check reached (Ready, Retry, Rejected) once; a Rejected
// check is Kueue rejecting the attempt.
func checks(n int, wl *kueue.Workload) []evidence.AuditEntry {
	var out []evidence.AuditEntry
	for _, c := range sortedChecks(wl) {
		if c.State == kueue.CheckStatePending || c.State == "" {
			continue
		}
		e := evidence.AuditEntry{Key: fmt.Sprintf("check#%d/%s=%s", n, c.Name, c.State), Decision: "check", Attempt: n,
			At: c.LastTransitionTime.UTC(), By: "admission check " + string(c.Name),
			Message: fmt.Sprintf("admission check %s: %s", c.Name, c.State), Facts: map[string]string{"state": string(c.State)}}
		if c.State == kueue.CheckStateRejected {
			e.Decision, e.Message = "rejected", fmt.Sprintf("attempt %d rejected by admission check %s", n, c.Name)
		}
		if c.Message != "" {
			e.Message += ": " + c.Message
		}
		out = append(out, e)
	}
	// Kueue resets a rejected check to Pending as it deactivates the
	// workload, often before the state is seen; TauGrid's check leaves
	// its refusal on the workload.
	if why := wl.Annotations[taugridv1.AnnotationAdmissionRefusal]; why != "" && !slices.ContainsFunc(out, func(e evidence.AuditEntry) bool { return e.Decision == "rejected" }) {
		out = append(out, evidence.AuditEntry{Key: fmt.Sprintf("rejected#%d/taugrid-policy", n), Decision: "rejected", Attempt: n,
			By: "TauGrid's admission check", Message: fmt.Sprintf("attempt %d rejected at admission: %s", n, why),
			Facts: map[string]string{"state": string(kueue.CheckStateRejected)}})
	}
	return out
}

func preempted(n int, p *taugridv1.Preemption, by Preemptor) evidence.AuditEntry {
	e := evidence.AuditEntry{Key: key("preempted", n), Decision: "preempted", Attempt: n, At: p.Time.UTC(), Facts: map[string]string{}}
	e.By = by.Words
	if e.By == "" {
		e.By = "Kueue"
	}
	if by.Priority != nil {
		e.By += fmt.Sprintf(" (priority %d)", *by.Priority)
		e.Facts["preemptor_priority"] = strconv.Itoa(int(*by.Priority))
	}
	e.Message = fmt.Sprintf("attempt %d preempted by %s", n, e.By)
	if by.Reason != "" {
		e.Message += ": " + by.Reason
		e.Facts["reason"] = by.Reason
	}
	return e
}
