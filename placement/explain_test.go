package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The messages are Kueue v0.17.0's own, as its tests write them
// (pkg/cache/scheduler/tas_cache_test.go, pkg/scheduler/scheduler_tas_test.go).
func TestExplainSaysKueuesTASMessagesInPlainWords(t *testing.T) {
	for name, tc := range map[string]struct {
		msg  string
		want Explanation
	}{
		"some pods fit": {
			msg:  `couldn't assign flavors to pod set main: topology "default" allows to fit only 3 out of 4 pod(s)`,
			want: Explanation{Text: "placement: only 3 of the run's 4 pods fit as asked on topology default now"},
		},
		"no pod fits, nodes short of cpu": {
			msg:  `topology "default" doesn't allow to fit any of 1 pod(s). Total nodes: 4; excluded: resource "cpu": 4`,
			want: Explanation{Text: "placement: the run's pod does not fit as asked on topology default now; of 4 nodes, 4 lack free cpu"},
		},
		"excluded by selector, resource and taint": {
			msg: `topology "default" doesn't allow to fit any of 1 pod(s). Total nodes: 4; excluded: nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1`,
			want: Explanation{Text: "placement: the run's pod does not fit as asked on topology default now; of 4 nodes, " +
				"2 lack the profile's node labels, 1 lacks free cpu, 1 has taint key=value:NoSchedule (not tolerated)"},
		},
		"a Ray worker group, short of GPUs": {
			msg:  `couldn't assign flavors to pod set gpu: topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: resource "example.com/gpu": 1`,
			want: Explanation{Text: "placement: only 4 of the run's 4 Ray worker (gpu) pods fit as asked on topology default now; of 2 nodes, 1 lacks free example.com/gpu"},
		},
		"slices": {
			msg:  `topology "default" doesn't allow to fit any of 2 slice(s)`,
			want: Explanation{Text: "placement: none of the run's 2 slices fit as asked on topology default now"},
		},
		"multi-layer slices": {
			msg:  `couldn't assign flavors to pod set one: topology "tas-three-level" doesn't allow to fit; 0/1 slice(s) fit on level cloud.provider.com/rack; 2/3 slice(s) fit on level kubernetes.io/hostname`,
			want: Explanation{Text: "placement: the run's Ray worker (one) pods do not fit as asked on topology tas-three-level now (0 of 1 groups fit per rack, 2 of 3 groups fit per host)"},
		},
		"a flavor without a topology": {
			msg:  `Flavors considered: one: default(NoFit;Flavor "default" does not support TopologyAwareScheduling)`,
			want: Explanation{Text: "placement: the run asks for a placement, but flavor default has no topology; use compute.placement: any, or a profile with a topology", Fix: true},
		},
		"a level the flavor lacks": {
			msg:  `couldn't assign flavors to pod set one: Flavor "tas-default" does not contain the requested level`,
			want: Explanation{Text: "placement: flavor tas-default's topology has no such level; ask for one of the levels the platform lists", Fix: true},
		},
		"two TAS flavors": {
			msg:  "failed to assign flavors to pod set main: more than one TAS flavor assigned: flavor-a, flavor-b",
			want: Explanation{Text: "placement: one pod set got two flavors with topologies (flavor-a, flavor-b); the platform's queue must give each pod set one", Fix: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := Explain(tc.msg)
			if !ok {
				t.Fatalf("Explain(%q) found no topology message", tc.msg)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Explain(%q) (-want +got):\n%s", tc.msg, diff)
			}
		})
	}
}

func TestExplainLeavesOtherMessagesAlone(t *testing.T) {
	for _, msg := range []string{
		"couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default, 1 more needed",
		"",
	} {
		if got, ok := Explain(msg); ok {
			t.Errorf("Explain(%q) = %+v, want no topology explanation", msg, got)
		}
	}
}
