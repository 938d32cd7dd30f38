package platform

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlatformSourceRecovery covers sourceRecovered: once git answers
// again, what the source step said when it could not is dropped and the
// commit's verdict is given again in full, even for a commit and
// generation already judged; a refusal of the commit itself is no source
// failure and stands while nothing changes. Main points at commit b,
// already judged at generation 1.
func TestPlatformSourceRecovery(t *testing.T) {
	judgedB := func() *builders.TauPlatformBuilder { return platform().Judged(sha("b"), 1) }
	ready := func(msg string) (string, metav1.ConditionStatus, string, string) {
		return taugridv1.ConditionReady, metav1.ConditionTrue, ReasonPolicyApplied, msg
	}
	cases := map[string]struct {
		platform *taugridv1.TauPlatform
		edits    map[string]string
		want     []string // conditions
		readyMsg string
		commit   string
		events   []string
		archives int
	}{
		"a ref found again lifts the stall, and its commit is judged anew": {
			platform: judgedB().InForce(sha("b")).PlatformCondition(ready("policy at bbbbbbbbbbbb in force")).
				PlatformCondition(taugridv1.ConditionStalled, metav1.ConditionTrue, ReasonRefNotFound, "refs/heads/main not found").Obj(),
			want: []string{"Ready=True/PolicyApplied"}, readyMsg: "policy at bbbbbbbbbbbb applied: 2 tenants, 4 profiles, 10 Kueue objects",
			commit: sha("b"), events: []string{"Normal PolicyApplied"}, archives: 1,
		},
		"a credentials Secret created after the stall lifts it": {
			platform: judgedB().InForce(sha("b")).PlatformCondition(ready("policy at bbbbbbbbbbbb in force")).
				PlatformCondition(taugridv1.ConditionStalled, metav1.ConditionTrue, shared.ReasonGitUnavailable, "credentials Secret not found").Obj(),
			want: []string{"Ready=True/PolicyApplied"}, readyMsg: "policy at bbbbbbbbbbbb applied: 2 tenants, 4 profiles, 10 Kueue objects",
			commit: sha("b"), events: []string{"Normal PolicyApplied"}, archives: 1,
		},
		"a git host back after an outage: the policy in force is Ready again": {
			platform: judgedB().InForce(sha("b")).
				PlatformCondition(taugridv1.ConditionReady, metav1.ConditionFalse, shared.ReasonGitUnavailable, "host unreachable").Obj(),
			want: []string{"Ready=True/PolicyApplied"}, readyMsg: "policy at bbbbbbbbbbbb applied: 2 tenants, 4 profiles, 10 Kueue objects",
			commit: sha("b"), events: []string{"Normal PolicyApplied"}, archives: 1,
		},
		"a git host back before any policy was in force: its commit is applied": {
			platform: judgedB().PlatformCondition(taugridv1.ConditionReady, metav1.ConditionFalse, shared.ReasonGitUnavailable, "host unreachable").Obj(),
			want:     []string{"Ready=True/PolicyApplied"}, readyMsg: "policy at bbbbbbbbbbbb applied: 2 tenants, 4 profiles, 10 Kueue objects",
			commit: sha("b"), events: []string{"Normal PolicyApplied"}, archives: 1,
		},
		"a git host back, the commit refused again: the policy in force is Ready, the refusal said anew": {
			platform: judgedB().InForce(sha("a")).
				PlatformCondition(taugridv1.ConditionReady, metav1.ConditionFalse, shared.ReasonGitUnavailable, "host unreachable").
				PlatformCondition(taugridv1.ConditionStalled, metav1.ConditionTrue, ReasonInvalidPolicy, "commit bbbbbbbbbbbb refused").Obj(),
			edits: map[string]string{"tenants.yaml": brokenTenants},
			want:  []string{"Ready=True/PolicyApplied", "Stalled=True/InvalidPolicy"}, readyMsg: "policy at aaaaaaaaaaaa in force",
			commit: sha("a"), events: []string{"Warning InvalidPolicy"}, archives: 1,
		},
		"a refused commit stays refused while nothing changes: git is not read again": {
			platform: judgedB().InForce(sha("a")).PlatformCondition(ready("policy at aaaaaaaaaaaa in force")).
				PlatformCondition(taugridv1.ConditionStalled, metav1.ConditionTrue, ReasonInvalidPolicy, "commit bbbbbbbbbbbb refused").Obj(),
			edits: map[string]string{"tenants.yaml": brokenTenants},
			want:  []string{"Ready=True/PolicyApplied", "Stalled=True/InvalidPolicy"}, readyMsg: "policy at aaaaaaaaaaaa in force",
			commit: sha("a"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, nil, tc.platform)
			w.git.push(sha("b"), exampleTree(t, tc.edits))
			w.mustReconcile(t)
			p := w.platform(t)
			if diff := cmp.Diff(tc.want, conditions(p)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got := condition(p, taugridv1.ConditionReady); got != tc.readyMsg {
				t.Errorf("Ready says %q, want %q", got, tc.readyMsg)
			}
			if p.Status.Commit != tc.commit || p.Status.ObservedGeneration != 1 {
				t.Errorf("commit in force %q at observed generation %d; want %q at 1", p.Status.Commit, p.Status.ObservedGeneration, tc.commit)
			}
			if diff := cmp.Diff(tc.events, reasons(w.drain())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if len(w.git.archives) != tc.archives {
				t.Errorf("archived %v, want %d archives", w.git.archives, tc.archives)
			}
		})
	}
}
