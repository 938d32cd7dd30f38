package run

import (
	"fmt"
	"testing"
	"time"

	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/test/builders"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// BenchmarkExplainingAThousandPendingRuns is the cost of one pass of the
// run reconciler over 1,000 queued runs of one ClusterQueue: each orders the
// queue from the cache's list and explains its own wait.
func BenchmarkExplainingAThousandPendingRuns(b *testing.B) {
	const n = 1000
	cq := builders.MakeClusterQueue("team-a").Cohort("research").Quota("h200", "nvidia.com/gpu", "8", "8").
		Reserved("h200", "nvidia.com/gpu", "16", "8").Obj()
	wls := make([]kueue.Workload, n)
	for i := range wls {
		name := fmt.Sprintf("job-r%04d-1-abcde", i)
		wls[i] = *builders.MakeWorkload(name, "team-a").UID(name).Priority(int32(i%3*1000)).
			Created(metav1.NewTime(time.Unix(int64(i), 0))).
			QuotaReserved(metav1.ConditionFalse, "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 8 more needed").Obj()
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range wls {
			pending := make([]*kueue.Workload, n)
			for j := range wls {
				pending[j] = &wls[j]
			}
			pos, total, ahead := positionIn(pending, &wls[i])
			ex := runs.ExplainWait(&wls[i], runs.QueueState{ClusterQueue: cq, Position: pos, Pending: total, Ahead: ahead})
			if ex.Kind != runs.WaitQuota {
				b.Fatal(ex)
			}
		}
	}
}
