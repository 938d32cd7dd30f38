package forge

import (
	"fmt"
	"regexp"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
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
	if len(st.Phases) > 0 {
		b.WriteString("| phase | since (UTC) |\n|---|---|\n")
		for _, p := range st.Phases {
			fmt.Fprintf(&b, "| %s | %s |\n", p.Phase, p.Time.UTC().Format("2006-01-02 15:04:05"))
		}
		b.WriteString("\n")
	}
	if w := st.Workload; w != nil {
		fmt.Fprintf(&b, "**Queue** `%s`; **workload** %s `%s`", w.Queue, w.Kind, w.Name)
		if w.Reason != "" {
			fmt.Fprintf(&b, "; Kueue: %s", w.Reason)
		}
		b.WriteString("\n\n")
	}
	if n := len(st.Attempts); n > 0 {
		fmt.Fprintf(&b, "**Attempts** %d\n\n", n)
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
	queue := ""
	if w := run.Status.Workload; w != nil {
		queue = w.Queue
	}
	switch run.Status.Phase {
	case taugridv1.PhaseQueued:
		reason := ""
		if w := run.Status.Workload; w != nil {
			reason = w.Reason
		}
		return StatePending, queuedDescription(queue, reason)
	case taugridv1.PhaseAdmitted:
		return StateRunning, "admitted in " + queue + ": starting"
	case taugridv1.PhaseRunning:
		return StateRunning, "running"
	case taugridv1.PhaseSucceeded:
		return StateSuccess, "succeeded"
	case taugridv1.PhaseFailed:
		return StateFailure, "failed: " + msg
	case taugridv1.PhaseCancelled:
		return StateError, msg
	}
	return StatePending, "accepted: preparing the run"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// Kueue's messages for a workload it cannot admit, as of v0.17.
var (
	reUnusedQuota = regexp.MustCompile(`insufficient unused quota for (\S+) in flavor \S+, (\d+) more needed`)
	reMaxCapacity = regexp.MustCompile(`insufficient quota for (\S+) in flavor \S+, request > maximum capacity \((\S+) > (\S+)\)`)
	reUnavailable = regexp.MustCompile(`resource (\S+) unavailable in ClusterQueue`)
	rePodSet      = regexp.MustCompile(`^couldn't assign flavors to pod set \S+: `)
)

// queuedDescription turns Kueue's reason into tenant words: whether the run
// will start on its own (busy now) or never (larger than the queue).
func queuedDescription(queue, reason string) string {
	prefix := "queued in " + queue
	if queue == "" {
		prefix = "queued"
	}
	var why string
	switch m := []([]string){reUnusedQuota.FindStringSubmatch(reason), reMaxCapacity.FindStringSubmatch(reason),
		reUnavailable.FindStringSubmatch(reason)}; {
	case m[0] != nil:
		why = fmt.Sprintf("waiting for %s %s", m[0][2], m[0][1])
	case m[1] != nil:
		why = fmt.Sprintf("never fits: asks for %s %s, the queue's maximum is %s", m[1][2], m[1][1], m[1][3])
	case m[2] != nil:
		why = fmt.Sprintf("never fits: the queue offers no %s", m[2][1])
	case reason == "" || strings.HasPrefix(reason, "queued in ") || strings.HasPrefix(reason, "submitted to queue "):
		return prefix
	default:
		why = rePodSet.ReplaceAllString(firstLine(reason), "")
	}
	return prefix + ": " + why
}
