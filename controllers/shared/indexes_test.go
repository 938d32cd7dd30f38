package shared

import (
	"slices"
	"testing"

	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// A pod is found by its run; a pod of no run is in no entry.
func TestPodsAreIndexedByTheirRun(t *testing.T) {
	of := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{render.LabelRun: "r1", render.LabelAttempt: "2"}}}
	if got := PodRun(of); !slices.Equal(got, []string{"r1"}) {
		t.Errorf("a run's pod: %q, want [r1]", got)
	}
	if got := PodRun(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}}); got != nil {
		t.Errorf("a pod of no run: %q, want none", got)
	}
}

// A Workload is found by its LocalQueue until Kueue has finished it:
// waiting, holding quota or admitted, it is in its queue's entry; finished,
// in none, however long its namespace keeps it.
func TestWorkloadsAreIndexedByTheirQueueUntilFinished(t *testing.T) {
	wl := func(conds ...string) *kueue.Workload {
		w := &kueue.Workload{Spec: kueue.WorkloadSpec{QueueName: "runs"}}
		for _, c := range conds {
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
		}
		return w
	}
	for name, tc := range map[string]struct {
		w    *kueue.Workload
		want []string
	}{
		"waiting":  {wl(), []string{"runs"}},
		"admitted": {wl(kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted), []string{"runs"}},
		"finished": {wl(kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted, kueue.WorkloadFinished), nil},
	} {
		if got := WorkloadQueue(tc.w); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
