package forge

import (
	"fmt"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Desired is the commit status a run should show now: its context, state,
// a one-line description in the researcher's words, and its evidence page.
// Owner, Repo and SHA are left to the caller, who knows the repository.
func Desired(run *taugridv1.TauRun) Status {
	s := Status{
		SHA:       run.Spec.Commit,
		Context:   "tau/" + run.Spec.Target + " " + run.Name,
		TargetURL: run.Status.EvidenceURL,
	}
	s.State, s.Description = describe(run)
	s.Description = Shorten(s.Description, MaxDescription)
	s.Phase, s.Generic = string(run.Status.Phase), generic(run)
	s.Summary = summary(run, s.Description)
	return s
}

// summary is a check run's Markdown body: what ran, where it waited, when
// each phase began, and what it was rendered from.
func summary(run *taugridv1.TauRun, line string) string {
	var b strings.Builder
	st := &run.Status
	fmt.Fprintf(&b, "%s\n\n", line)
	fmt.Fprintf(&b, "**Run** `%s`: target `%s` at `%.12s`, %s `%s`", run.Name, run.Spec.Target, run.Spec.Commit, run.Spec.Trigger.Kind, run.Spec.Trigger.Ref)
	if r := run.Spec.Trigger.Requester; r != "" {
		fmt.Fprintf(&b, " by %s", r)
	}
	b.WriteString("\n\n")
	if sig := st.Signature; sig != nil && sig.Verified {
		fmt.Fprintf(&b, "**Signed** by %s with %s key `%s` (%s)\n\n", sig.Principal, sig.Method, sig.Fingerprint, sig.Object)
	} else if sig != nil {
		fmt.Fprintf(&b, "**Signature** %s\n\n", sig.Reason)
	}
	if len(st.Phases) > 0 {
		b.WriteString("| phase | since (UTC) |\n|---|---|\n")
		for _, p := range st.Phases {
			fmt.Fprintf(&b, "| %s | %s |\n", p.Phase, p.Time.UTC().Format("2006-01-02 15:04:05"))
		}
		b.WriteString("\n")
	}
	if w := st.Workload; w != nil {
		fmt.Fprintf(&b, "**Queue** `%s`; **workload** %s `%s`", w.Queue, w.Kind, w.Name)
		if w.Cluster != "" {
			fmt.Fprintf(&b, " on **cluster** `%s`", w.Cluster)
		}
		b.WriteString("\n\n")
		if w.Reason != "" && st.Phase == taugridv1.PhaseQueued {
			// The run reconciler's explanation: position, who is ahead,
			// the quota table, Kueue's own words.
			fmt.Fprintf(&b, "**Why it waits**\n\n```\n%s\n```\n\n", strings.ReplaceAll(w.Reason, "```", "'''"))
		}
	}
	if n := len(st.Attempts); n > 0 {
		fmt.Fprintf(&b, "**Attempts** %d\n\n", n)
		if u := st.Attempts[n-1].GPUUsage; u != nil {
			fmt.Fprintf(&b, "**GPUs** %s\n\n", u.Summary)
		}
	}
	if st.ConfigDigest != "" {
		fmt.Fprintf(&b, "**Config** `%s` `%s`; **policy** at `%.12s` `%s`\n\n", st.TauFile, st.ConfigDigest, st.PolicyCommit, st.PolicyDigest)
	}
	if st.EvidenceURL != "" {
		fmt.Fprintf(&b, "[Evidence](%s)\n", st.EvidenceURL)
	}
	return b.String()
}

func describe(run *taugridv1.TauRun) (State, string) {
	msg := firstLine(run.Status.Message)
	switch run.Status.Phase {
	case taugridv1.PhaseQueued:
		// The run reconciler explains every wait in one line (ExplainWait).
		if msg == "" || strings.HasPrefix(msg, "submitted to queue ") {
			return StatePending, generic(run)
		}
		return StatePending, msg
	case taugridv1.PhaseAdmitted:
		// Pods on their way show the generic line, so a count going up
		// posts nothing; the first sign they are held replaces it at once.
		if c := meta.FindStatusCondition(run.Status.Conditions, taugridv1.ConditionPodsRunning); c != nil && c.Reason == taugridv1.ReasonPodsNotStarting && msg != "" {
			return StatePending, msg
		}
		return StateRunning, generic(run)
	case taugridv1.PhaseRunning:
		if since := idleSince(run); since != "" {
			return StateRunning, "running" + onCluster(run) + "; warning: GPUs idle since " + since
		}
		return StateRunning, "running" + onCluster(run)
	case taugridv1.PhaseSucceeded:
		return StateSuccess, "succeeded" + onCluster(run)
	case taugridv1.PhaseFailed:
		return StateFailure, "failed" + onCluster(run) + ": " + msg
	case taugridv1.PhaseCancelled:
		return StateError, msg
	}
	return StatePending, "accepted: preparing the run"
}

// idleSince is when the current attempt's GPUs went idle, by the
// platform's idle rule, or "". The time, not a duration, so the line does
// not change (and post again) every minute.
func idleSince(run *taugridv1.TauRun) string {
	n := len(run.Status.Attempts)
	if n == 0 {
		return ""
	}
	if u := run.Status.Attempts[n-1].GPUUsage; u != nil && u.Idle && u.IdleSince != nil {
		return u.IdleSince.UTC().Format("15:04") + " UTC"
	}
	return ""
}

// generic is the line a queued or admitted run shows before the run
// reconciler explains what it waits for; other phases have none.
func generic(run *taugridv1.TauRun) string {
	queue := ""
	if w := run.Status.Workload; w != nil {
		queue = w.Queue
	}
	switch run.Status.Phase {
	case taugridv1.PhaseQueued:
		return strings.TrimSpace("queued in " + queue)
	case taugridv1.PhaseAdmitted:
		return "admitted in " + queue + ": starting" + onCluster(run)
	}
	return ""
}

// onCluster names the MultiKueue worker cluster a dispatched run's
// attempt runs on, early in the line so the forge's length limit never
// cuts it; "" for a run on the controller's own cluster.
func onCluster(run *taugridv1.TauRun) string {
	if w := run.Status.Workload; w != nil && w.Cluster != "" {
		return " on cluster " + w.Cluster
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
