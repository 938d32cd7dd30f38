package runs

import (
	"strings"

	"github.com/taugrid/taugrid/placement"
)

// isPlacementMessage reports a Kueue message about topology placement.
func isPlacementMessage(msg string) bool {
	_, ok := placement.Explain(msg)
	return ok
}

// explainPlacement is ExplainWait for Kueue's TAS messages: waiting for a
// domain with room, or (Fix) a placement the platform's flavors cannot give.
// The long form keeps every word the commit status has no room for.
func explainPlacement(msg string, q QueueState, cq string) Explanation {
	ex, _ := placement.Explain(msg)
	words := strings.TrimPrefix(ex.Text, "placement: ")
	kind, text := WaitPlacement, positioned("queued", q, cq)+": "+words
	if ex.Fix {
		kind, text = WaitInfeasible, "cannot run: "+words
	}
	out := explanation(kind, text, q, msg)
	out.Long = text + "." + strings.TrimPrefix(out.Long, out.Short+".")
	return out
}
