package evidence

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

var (
	needMore   = regexp.MustCompile(`insufficient unused quota for ([^ ]+) in flavor ([^ ,]+), (\d+\S*) more needed`)
	neverFits  = regexp.MustCompile(`insufficient quota for ([^ ]+) in flavor ([^ ,]+), request > maximum capacity \((\S+) > (\S+)\)`)
	preempting = regexp.MustCompile(`(?i)pending the preemption of (\d+) workload`)
	noQueue    = regexp.MustCompile(`(?i)(LocalQueue|ClusterQueue) (\S+) (doesn't exist|is inactive|is stopped|is held)`)
)

// ExplainWait turns Kueue's pending reason into plain words: what the run
// waits for, and whether it will start on its own.
func ExplainWait(reason string) string {
	switch {
	case reason == "":
		return "Kueue has not said why yet; it usually does within seconds."
	case neverFits.MatchString(reason):
		m := neverFits.FindStringSubmatch(reason)
		return fmt.Sprintf("This run asks for %s %s in flavor %s, more than the queue can ever give (%s). "+
			"It will not start on its own: lower the request in the tau file or ask the platform team for more quota.", m[3], m[1], m[2], m[4])
	case needMore.MatchString(reason):
		m := needMore.FindStringSubmatch(reason)
		return fmt.Sprintf("The quota is in use by other runs: it needs %s more %s in flavor %s than is free now. "+
			"It starts on its own when enough of them finish.", m[3], m[1], m[2])
	case preempting.MatchString(reason):
		m := preempting.FindStringSubmatch(reason)
		return fmt.Sprintf("Kueue is making room by stopping %s lower-priority run(s); this run starts once they have stopped.", m[1])
	case noQueue.MatchString(reason):
		m := noQueue.FindStringSubmatch(reason)
		return fmt.Sprintf("The %s %s %s, so nothing in it is admitted. Ask the platform team.", m[1], m[2], m[3])
	case strings.Contains(reason, "untolerated taint") || strings.Contains(reason, "node affinity"):
		return "No resource flavor of the queue matches the nodes this run may use. It will not start on its own; ask the platform team."
	}
	return "Kueue says: " + reason
}

// HumanDuration writes a duration the way people say it: "45s", "3m 12s",
// "2h 5m".
func HumanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}
