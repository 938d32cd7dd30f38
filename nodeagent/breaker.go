package nodeagent

import (
	"fmt"
	"math"
	"time"
)

// BreakerPolicy bounds how many GPU nodes may be tainted at once: a fleet-wide
// pattern of faults is usually a driver, firmware or agent bug, not hardware.
type BreakerPolicy struct {
	// MaxShare is the largest share of GPU nodes (0 < MaxShare <= 1) that may
	// carry the taint having got it within Window. At least one node may always
	// be tainted.
	MaxShare float64
	Window   time.Duration
}

// GPUNode is what the breaker needs to know about one GPU node.
type GPUNode struct {
	Name      string
	Tainted   bool
	TaintedAt time.Time // zero when unknown: counted as recent
}

// BreakerDecision is whether this node may be tainted now, and why.
type BreakerDecision struct {
	Allow   bool   `json:"allow"`
	Recent  int    `json:"recent"` // other GPU nodes tainted within the window
	Limit   int    `json:"limit"`
	Total   int    `json:"total"`
	Message string `json:"message"`
}

// BreakerAllows decides whether self may be tainted, given every GPU node. Pure.
func BreakerAllows(p BreakerPolicy, self string, nodes []GPUNode, now time.Time) BreakerDecision {
	total, recent := 0, 0
	seenSelf := false
	for _, n := range nodes {
		total++
		if n.Name == self {
			seenSelf = true
			continue
		}
		if n.Tainted && (n.TaintedAt.IsZero() || now.Sub(n.TaintedAt) < p.Window) {
			recent++
		}
	}
	if !seenSelf {
		total++
	}
	limit := max(1, int(math.Floor(p.MaxShare*float64(total))))
	d := BreakerDecision{Allow: recent+1 <= limit, Recent: recent, Limit: limit, Total: total}
	state := "closed"
	if !d.Allow {
		state = "open"
	}
	d.Message = fmt.Sprintf("circuit breaker %s: %d of %d GPU nodes tainted in the last %s, limit %d",
		state, recent, total, p.Window, limit)
	return d
}
