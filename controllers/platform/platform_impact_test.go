package platform

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A push that changes the policy in force is explained after the fact:
// status.lastChange and an event say what it did to the runs, a warning
// naming the runs it strands. The preview is no gate: the change applies
// even when it strands runs, or when the policy before it cannot be read
// again.
func TestAPushThatChangesThePolicyIsExplained(t *testing.T) {
	// team-a may register only its "other-*" repositories: llm's runs
	// not yet submitted could never be.
	narrowed := strings.Replace(exampleTree(t, nil)["tenants.yaml"],
		`  - "https://git.example.com/team-a/*"`, `  - "https://git.example.com/team-a/other-*"`, 1)
	objs := func() []client.Object {
		return []client.Object{
			builders.MakeTauRepository("llm", "team-a", "https://git.example.com/team-a/llm").Obj(),
			builders.MakeTauRun("llm-1", "team-a").Repository("llm").Phase(taugridv1.PhasePending, "").Obj(),
			builders.MakeTauRun("llm-2", "team-a").Repository("llm").Phase(taugridv1.PhaseSucceeded, "").Obj(),
		}
	}
	cases := map[string]struct {
		edits        map[string]string
		beforeGone   bool
		events       []string
		stranded     []string
		summary      string // in status.lastChange.summary; "" for no lastChange
		noLastChange bool
	}{
		"a change that strands a run not yet submitted is a warning naming it": {
			edits:    map[string]string{"tenants.yaml": narrowed},
			events:   []string{"Warning PolicyStrandsRuns", "Normal PolicyApplied"},
			stranded: []string{"team-a/llm-1"},
			summary:  "Strands 1 queued run (team-a 1)",
		},
		"a change that touches no run is explained all the same": {
			edits:   map[string]string{"limits.yaml": exampleTree(t, nil)["limits.yaml"] + "\n# reviewed\n"},
			events:  []string{"Normal PolicyImpact", "Normal PolicyApplied"},
			summary: "No effect on tenants' quotas, runs or nodes",
		},
		"a policy before that git no longer has leaves no preview, and the change applies": {
			edits:        map[string]string{"tenants.yaml": narrowed},
			beforeGone:   true,
			events:       []string{"Normal PolicyApplied"},
			noLastChange: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, nil, append(objs(), platform().InForce(sha("a")).Judged(sha("a"), 1).Obj())...)
			if !tc.beforeGone {
				w.git.push(sha("a"), exampleTree(t, nil))
			}
			w.git.push(sha("b"), exampleTree(t, tc.edits))
			w.mustReconcile(t)
			p := w.platform(t)
			if p.Status.Commit != sha("b") {
				t.Fatalf("commit in force = %q, want %q: the preview must not hold a change back", p.Status.Commit, sha("b"))
			}
			events := w.drain()
			if diff := cmp.Diff(tc.events, reasons(events)); diff != "" {
				t.Errorf("events (-want +got):\n%s\n%v", diff, events)
			}
			lc := p.Status.LastChange
			if tc.noLastChange {
				if lc != nil {
					t.Errorf("lastChange = %+v, want none", lc)
				}
				return
			}
			if lc == nil {
				t.Fatal("no status.lastChange")
			}
			if lc.From != sha("a") || lc.To != sha("b") || lc.Time.IsZero() {
				t.Errorf("lastChange from %s to %s at %v; want %s to %s, timed", lc.From, lc.To, lc.Time, sha("a"), sha("b"))
			}
			if !strings.Contains(lc.Summary, tc.summary) {
				t.Errorf("lastChange.summary = %q, want it to say %q", lc.Summary, tc.summary)
			}
			if lc.Stranded != (len(tc.stranded) > 0) || !cmp.Equal(lc.StrandedRuns, tc.stranded) {
				t.Errorf("lastChange stranded %v %v, want %v", lc.Stranded, lc.StrandedRuns, tc.stranded)
			}
			for _, run := range tc.stranded {
				if !strings.Contains(strings.Join(events, "\n"), run) {
					t.Errorf("no event names stranded run %s: %v", run, events)
				}
			}
		})
	}
}
