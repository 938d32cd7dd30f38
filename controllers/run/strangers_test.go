package run

import (
	"strings"
	"testing"

	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TestAnotherTeamsWorkloadIsNeverNamed: what a run says of the workloads
// ahead of it, or of the one that frees the quota, names its own team's
// runs and only counts another team's, with their priority.
func TestAnotherTeamsWorkloadIsNeverNamed(t *testing.T) {
	runOf := func(ns, run string) *kueue.Workload {
		w := builders.MakeWorkload("job-"+run+"-1", ns).Priority(1000).Obj()
		w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: run + "-1", UID: "j", Controller: ptr.To(true)}}
		return w
	}
	cases := map[string]struct {
		w    *kueue.Workload
		want string
	}{
		"the team's own run":        {runOf("team-a", "big"), "team-a/run big (priority 1000)"},
		"another team's run":        {runOf("team-b", "secret-project"), "a run of another team (priority 1000)"},
		"another team's other work": {builders.MakeWorkload("nightly", "team-b").Priority(10).Obj(), "a workload of another team (priority 10)"},
		"the team's own other work": {builders.MakeWorkload("nightly", "team-a").Priority(10).Obj(), "team-a/nightly (priority 10)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := describeWorkload(tc.w, "team-a")
			if got != tc.want {
				t.Errorf("describeWorkload = %q, want %q", got, tc.want)
			}
			if tc.w.Namespace != "team-a" && (strings.Contains(got, tc.w.Namespace) || strings.Contains(got, tc.w.Name)) {
				t.Errorf("%q names another team's workload", got)
			}
		})
	}
}
