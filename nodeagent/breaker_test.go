package nodeagent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestBreakerAllowsAShareOfGPUNodesPerWindow(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	policy := BreakerPolicy{MaxShare: 0.5, Window: 5 * time.Minute}
	nodes := func(tainted ...GPUNode) []GPUNode {
		out := []GPUNode{{Name: "self"}}
		out = append(out, tainted...)
		for len(out) < 8 {
			out = append(out, GPUNode{Name: "healthy-" + string(rune('a'+len(out)))})
		}
		return out
	}
	recent := func(name string) GPUNode { return GPUNode{Name: name, Tainted: true, TaintedAt: now.Add(-time.Minute)} }
	cases := map[string]struct {
		nodes []GPUNode
		want  BreakerDecision
	}{
		"the first broken node of eight is tainted": {
			nodes: nodes(),
			want:  BreakerDecision{Allow: true, Recent: 0, Limit: 4, Total: 8},
		},
		"the fourth of eight within the window is tainted": {
			nodes: nodes(recent("a"), recent("b"), recent("c")),
			want:  BreakerDecision{Allow: true, Recent: 3, Limit: 4, Total: 8},
		},
		"the fifth of eight within the window is withheld": {
			nodes: nodes(recent("a"), recent("b"), recent("c"), recent("d")),
			want:  BreakerDecision{Allow: false, Recent: 4, Limit: 4, Total: 8},
		},
		"taints older than the window do not count": {
			nodes: nodes(recent("a"), recent("b"), recent("c"),
				GPUNode{Name: "d", Tainted: true, TaintedAt: now.Add(-time.Hour)}),
			want: BreakerDecision{Allow: true, Recent: 3, Limit: 4, Total: 8},
		},
		"a taint of unknown age counts as recent": {
			nodes: nodes(recent("a"), recent("b"), recent("c"), GPUNode{Name: "d", Tainted: true}),
			want:  BreakerDecision{Allow: false, Recent: 4, Limit: 4, Total: 8},
		},
		"a single GPU node may always be tainted": {
			nodes: []GPUNode{{Name: "self"}},
			want:  BreakerDecision{Allow: true, Recent: 0, Limit: 1, Total: 1},
		},
		"the second of two is withheld at half": {
			nodes: []GPUNode{{Name: "self"}, recent("a")},
			want:  BreakerDecision{Allow: false, Recent: 1, Limit: 1, Total: 2},
		},
		"a node missing from the list (no GPU label yet) still counts itself": {
			nodes: []GPUNode{recent("a"), {Name: "b"}, {Name: "c"}},
			want:  BreakerDecision{Allow: true, Recent: 1, Limit: 2, Total: 4},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := BreakerAllows(policy, "self", tc.nodes, now)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(BreakerDecision{}, "Message")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBreakerMessageSaysWhy(t *testing.T) {
	d := BreakerAllows(BreakerPolicy{MaxShare: 0.5, Window: 5 * time.Minute}, "self",
		[]GPUNode{{Name: "self"}, {Name: "a", Tainted: true}}, time.Now())
	want := "circuit breaker open: 1 of 2 GPU nodes tainted in the last 5m0s, limit 1"
	if d.Message != want {
		t.Errorf("message %q, want %q", d.Message, want)
	}
}
