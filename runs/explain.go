package runs

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// maxShortExplanation fits a GitHub commit status description.
const maxShortExplanation = 140

// WaitKind names why a run waits, for tests, metrics and the forge.
type WaitKind string

// The kinds of wait.
const (
	WaitUnseen          WaitKind = "Unseen"          // Kueue has not looked at the workload yet
	WaitQueued          WaitKind = "Queued"          // in line, no verdict yet
	WaitQuota           WaitKind = "Quota"           // not enough unused quota now
	WaitPreemption      WaitKind = "Preempting"      // lower-priority workloads are being preempted for it
	WaitAdmissionChecks WaitKind = "AdmissionChecks" // quota reserved, admission checks pending
	WaitDispatched      WaitKind = "Dispatched"      // quota reserved in the manager, no worker has admitted it yet
	WaitStopped         WaitKind = "QueueStopped"    // the platform stopped the queue
	WaitInfeasible      WaitKind = "Infeasible"      // can never be admitted as asked
	WaitPlacement       WaitKind = "Placement"       // quota free, but no domain of the topology has room as asked now
	WaitOther           WaitKind = "Other"           // Kueue said something else; its words are kept
)

// QueueState is what the controller's cache knows of a workload's queue.
type QueueState struct {
	// ClusterQueue the workload's LocalQueue feeds; nil when unknown.
	ClusterQueue *kueue.ClusterQueue
	// Position is the workload's place among the ClusterQueue's pending
	// workloads in admission order (1 is next), of Pending; 0 when unknown.
	Position, Pending int
	// Ahead names, in tenant terms, up to a few of the workloads before it.
	Ahead []string
	// FreesBy is when quota frees at the latest: the soonest end of the
	// time limit of a workload the ClusterQueue admitted; zero if none
	// has one. FreedBy names that workload.
	FreesBy time.Time
	FreedBy string
	// StartsAt is when the workload starts if the runs ahead of it end by
	// their time limits and start in order (Estimate); zero when unknown
	// or not a minute away. Now is when the state was read.
	StartsAt, Now time.Time
}

// Explanation says why a run waits: a short line for a commit status and
// the first line of tau status, and a longer text for the check run, tau
// status and the evidence, ending with Kueue's own words.
type Explanation struct {
	Kind        WaitKind
	Short, Long string
}

// Kueue v0.17's scheduler messages, which follow a small grammar.
var (
	insufficientRE  = regexp.MustCompile(`insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed`)
	preemptingRE    = regexp.MustCompile(`Pending the preemption of (\d+) workload`)
	maxCapacityRE   = regexp.MustCompile(`insufficient quota for (\S+) in flavor (\S+), .*current podset request \((\S+)\) > maximum capacity \((\S+)\)`)
	unavailableRE   = regexp.MustCompile(`resource (\S+) unavailable in ClusterQueue`)
	stoppedRE       = regexp.MustCompile(`(ClusterQueue|LocalQueue) \S+ is (stopped|inactive)|is inactive|is stopped`)
	misconfiguredRE = regexp.MustCompile(`doesn't match ClusterQueue selector|ClusterQueue \S+ not found|LocalQueue \S+ doesn't exist|not found`)
)

// ExplainWait explains, in plain words, why a workload waits. It is pure:
// the reconciler feeds it the Workload and its queue from the cache.
func ExplainWait(wl *kueue.Workload, q QueueState) Explanation {
	if wl == nil {
		return Explanation{Kind: WaitUnseen, Short: "waiting for Kueue to see the workload", Long: "Kueue has not created a Workload for the job yet."}
	}
	cq := "queue " + string(wl.Spec.QueueName)
	if q.ClusterQueue != nil {
		cq = q.ClusterQueue.Name
	}
	if why := wl.Annotations[taugridv1.AnnotationAdmissionRefusal]; why != "" {
		// TauGrid's check refused it: Kueue deactivated it for good.
		return explanation(WaitInfeasible, "cannot run: "+firstLine(why), q, why)
	}
	for _, ac := range wl.Status.AdmissionChecks {
		// Kueue deactivates a workload an admission check rejects: it is
		// never admitted, whatever the queue does.
		if ac.State == kueue.CheckStateRejected {
			why := "admission check " + string(ac.Name) + " refused it"
			if ac.Message != "" {
				why = firstLine(ac.Message)
			}
			return explanation(WaitInfeasible, "cannot run: "+why, q, ac.Message)
		}
	}
	reserved := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	if reserved != nil && reserved.Status == metav1.ConditionTrue {
		var pending []string
		for _, ac := range wl.Status.AdmissionChecks {
			if ac.State != kueue.CheckStateReady {
				pending = append(pending, string(ac.Name))
			}
		}
		// Every check passed: Kueue admits on its next look.
		wait := "admission checks passed, waiting for Kueue to admit it"
		if len(pending) > 0 {
			wait = "waiting for admission checks: " + strings.Join(pending, ", ")
		}
		return explanation(WaitAdmissionChecks, "quota reserved in "+cq+"; "+wait, q, "")
	}
	msg := ""
	if reserved != nil {
		msg = reserved.Message
	}
	if ev := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue && msg == "" {
		msg = ev.Message
	}
	switch {
	case msg == "":
		return explanation(WaitQueued, positioned("queued", q, cq)+startsAbout(q, "; "), q, "")
	case maxCapacityRE.MatchString(msg):
		m := maxCapacityRE.FindStringSubmatch(msg)
		return explanation(WaitInfeasible, fmt.Sprintf("cannot run: asks %s %s, %s can hold at most %s (flavor %s)", m[3], m[1], cq, m[4], m[2]), q, msg)
	case unavailableRE.MatchString(msg):
		m := unavailableRE.FindStringSubmatch(msg)
		return explanation(WaitInfeasible, fmt.Sprintf("cannot run: %s offers no %s; ask for a profile that has it", cq, m[1]), q, msg)
	case stoppedRE.MatchString(msg):
		return explanation(WaitStopped, cq+" is paused by the platform; the run starts when it reopens", q, msg)
	case isPlacementMessage(msg):
		return explainPlacement(msg, q, cq)
	case insufficientRE.MatchString(msg):
		m := insufficientRE.FindStringSubmatch(msg)
		res, flavor, more := m[1], m[2], m[3]
		if p := preemptingRE.FindStringSubmatch(msg); p != nil {
			return explanation(WaitPreemption, fmt.Sprintf("freeing %s %s: preempting %s lower-priority workload(s); starts when they stop", more, res, p[1]), q, msg)
		}
		short := positioned("queued", q, cq) + fmt.Sprintf(": needs %s more %s (%s)", more, res, flavor)
		if use := usage(q.ClusterQueue, flavor, res); use != "" {
			short += "; " + use
		}
		tail := startsAbout(q, "; ")
		if eta := q.FreesBy; tail == "" && !eta.IsZero() {
			tail = "; frees by " + eta.UTC().Format("15:04") + " UTC"
		}
		if s := short + tail; len([]rune(s)) <= maxShortExplanation {
			short = s
		}
		return explanation(WaitQuota, short, q, msg)
	case misconfiguredRE.MatchString(msg):
		return explanation(WaitInfeasible, "cannot run: "+firstSentence(msg), q, msg)
	}
	return explanation(WaitOther, positioned("queued", q, cq)+": "+firstSentence(msg), q, msg)
}

// positioned is "queued #3 of 7 in team-a", or without the position when
// it is unknown.
func positioned(verb string, q QueueState, cq string) string {
	if q.Position > 0 {
		return fmt.Sprintf("%s #%d of %d in %s", verb, q.Position, q.Pending, cq)
	}
	return verb + " in " + cq
}

// startsAbout is "starts about 16:05 UTC" after sep, or "" when the
// estimate is unknown; a day or more ahead it names the weekday ("starts
// about Mon 16:05 UTC"), as a bare time reads as the next 24 hours. A
// time, not a duration, so the line (and the commit status) changes only
// when the estimate does, not every minute.
func startsAbout(q QueueState, sep string) string {
	if q.StartsAt.IsZero() {
		return ""
	}
	layout := "15:04"
	if q.StartsAt.Sub(q.Now) >= 24*time.Hour {
		layout = "Mon 15:04"
	}
	return sep + "starts about " + q.StartsAt.Round(time.Minute).UTC().Format(layout) + " UTC"
}

// usage is "team-a uses 16/8 nvidia.com/gpu (8 borrowed, may borrow 8)".
func usage(cq *kueue.ClusterQueue, flavor, res string) string {
	if cq == nil {
		return ""
	}
	for _, r := range quotaRows(cq) {
		if r.Flavor != flavor || r.Resource != res {
			continue
		}
		s := fmt.Sprintf("%s uses %s/%s", cq.Name, r.InUse, r.Nominal)
		switch {
		case r.Borrowed != "0":
			s += fmt.Sprintf(" (%s borrowed)", r.Borrowed)
		case r.BorrowingLimit == "none" || r.BorrowingLimit == "0":
			s += " (no borrowing)"
		}
		return s
	}
	return ""
}

func explanation(kind WaitKind, short string, q QueueState, kueueMsg string) Explanation {
	if r := []rune(short); len(r) > maxShortExplanation {
		short = string(r[:maxShortExplanation-1]) + "…"
	}
	var b strings.Builder
	b.WriteString(short + ".")
	if q.Position > 0 {
		fmt.Fprintf(&b, "\nPosition %d of %d pending in ClusterQueue %s, in admission order (priority, then age).", q.Position, q.Pending, q.ClusterQueue.GetName())
	}
	if len(q.Ahead) > 0 {
		b.WriteString("\nAhead: " + strings.Join(q.Ahead, "; ") + ".")
	}
	if !q.StartsAt.IsZero() {
		fmt.Fprintf(&b, "\nEstimate: starts about %s, once the runs ahead of it and those holding the quota have ended by their time limits (sooner if they end earlier; later if a run of higher priority comes).",
			q.StartsAt.Round(time.Minute).UTC().Format("2006-01-02 15:04 UTC"))
	}
	if !q.FreesBy.IsZero() {
		fmt.Fprintf(&b, "\nQuota frees by %s at the latest, when the time limit of %s ends (sooner if it finishes earlier).",
			q.FreesBy.UTC().Format("2006-01-02 15:04 UTC"), q.FreedBy)
	}
	if cq := q.ClusterQueue; cq != nil {
		if table := quotaTable(cq); table != "" {
			b.WriteString("\nQuota of " + cq.Name + ":\n" + table)
		}
	}
	if kueueMsg != "" {
		b.WriteString("\nKueue: " + kueueMsg)
	}
	return Explanation{Kind: kind, Short: short, Long: b.String()}
}

// quotaTable is quotaRows as text.
func quotaTable(cq *kueue.ClusterQueue) string {
	var b strings.Builder
	for _, r := range quotaRows(cq) {
		fmt.Fprintf(&b, "  %-8s %-16s nominal %-6s borrowing limit %-9s in use %s (borrowed %s)\n",
			r.Flavor, r.Resource, r.Nominal, r.BorrowingLimit, r.InUse, r.Borrowed)
	}
	return strings.TrimRight(b.String(), "\n")
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func firstSentence(s string) string {
	s = firstLine(s)
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i]
	}
	return s
}
