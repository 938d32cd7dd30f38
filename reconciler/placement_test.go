package reconciler

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
			wantShort: "queued in team-a: placement: only 1 of the run's 2 pods fit as asked on topology gpu-fabric right now; of 8 nodes, 6 nodes have too little free nvidia.com/gpu",
		},
		"a flavor without topology": {
			msg:       `couldn't assign flavors to pod set main: Flavor "h200" does not support TopologyAwareScheduling`,
			kind:      WaitInfeasible,
			wantShort: "cannot run: the run asks for a placement, but flavor h200 has no topology",
		},
	} {
		t.Run(name, func(t *testing.T) {
			ex := ExplainWait(waitingWorkload(metav1.ConditionFalse, tc.msg), QueueState{ClusterQueue: teamQueue("8", "", "0", "0")})
			if ex.Kind != tc.kind || !strings.HasPrefix(ex.Short, tc.wantShort[:min(len(tc.wantShort), maxShortExplanation-1)]) {
				t.Errorf("ExplainWait = %s %q, want %s %q", ex.Kind, ex.Short, tc.kind, tc.wantShort)
			}
			if !strings.Contains(ex.Long, "Kueue: "+tc.msg) {
				t.Errorf("the long explanation drops Kueue's words: %q", ex.Long)
			}
		})
	}
}
