package runs

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kueue v0.17's TAS messages reach the run's status in plain words: a wait
// for room in a domain, or a placement the platform's flavors cannot give.
func TestTopologyWaitsAreExplained(t *testing.T) {
	for name, tc := range map[string]struct {
		msg       string
		kind      WaitKind
		wantShort string
	}{
		"no rack has room for both pods now": {
			msg:       `couldn't assign flavors to pod set main: topology "gpu-fabric" allows to fit only 1 out of 2 pod(s). Total nodes: 8; excluded: resource "nvidia.com/gpu": 6`,
			kind:      WaitPlacement,
			wantShort: "queued in team-a: only 1 of the run's 2 pods fit as asked on topology gpu-fabric now; of 8 nodes, 6 lack free nvidia.com/gpu",
		},
		"nodes left out for three reasons: the status is cut, the long form is not": {
			msg:       `couldn't assign flavors to pod set main: topology "gpu-fabric" allows to fit only 1 out of 2 pod(s). Total nodes: 8; excluded: nodeSelector: 2, taint "nvidia.com/gpu=faulty:NoSchedule": 1, resource "nvidia.com/gpu": 4`,
			kind:      WaitPlacement,
			wantShort: "queued in team-a: only 1 of the run's 2 pods fit as asked on topology gpu-fabric now; of 8 nodes, 2 lack the profile's node labels, 1 has taint nvidia.com/gpu=faulty:NoSchedule (not tolerated), 4 lack free nvidia.com/gpu",
		},
		"a flavor without topology": {
			msg:       `couldn't assign flavors to pod set main: Flavor "h200" does not support TopologyAwareScheduling`,
			kind:      WaitInfeasible,
			wantShort: "cannot run: the run asks for a placement, but flavor h200 has no topology; use compute.placement: any, or a profile with a topology",
		},
	} {
		t.Run(name, func(t *testing.T) {
			ex := ExplainWait(waitingWorkload(metav1.ConditionFalse, tc.msg), QueueState{ClusterQueue: teamQueue("8", "", "0", "0")})
			if ex.Kind != tc.kind || !strings.HasPrefix(ex.Short, tc.wantShort[:min(len(tc.wantShort), maxShortExplanation-1)]) {
				t.Errorf("ExplainWait = %s %q, want %s %q", ex.Kind, ex.Short, tc.kind, tc.wantShort)
			}
			if !strings.HasPrefix(ex.Long, tc.wantShort+".") {
				t.Errorf("the long explanation %q does not start with %q", ex.Long, tc.wantShort+".")
			}
			if !strings.Contains(ex.Long, "Kueue: "+tc.msg) {
				t.Errorf("the long explanation drops Kueue's words: %q", ex.Long)
			}
		})
	}
}
