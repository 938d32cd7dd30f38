package run

import (
	"context"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// What the branch tables beside reconcile_test.go share on top of its
// runWorld: which objects the fake client still holds, the events as
// "type reason", a clock to move, and tau.yaml variants.

// holds reports whether the fake client still holds o (by kind and key).
func (w *runWorld) holds(t testing.TB, o client.Object) bool {
	t.Helper()
	err := w.c.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// reasons drains the events recorded so far, as "type reason".
func (w *runWorld) reasons() []string {
	return sharedtest.Reasons(sharedtest.Drain(w.events))
}

// after moves the reconciler's clock on by d.
func (w *runWorld) after(d time.Duration) {
	w.r.Clock.(*clocktesting.FakeClock).Step(d)
}

// tauWithLimits is the example tau.yaml with more lines under limits:.
func tauWithLimits(t testing.TB, lines ...string) []byte {
	t.Helper()
	data := string(exampleTauFile(t))
	const at = "limits:\n  timeout: 2h\n"
	if !strings.Contains(data, at) {
		t.Fatalf("the example tau.yaml no longer ends with %q", at)
	}
	return []byte(strings.Replace(data, at, at+"  "+strings.Join(lines, "\n  ")+"\n", 1))
}

// withConditions is wl with conds added, stamped now.
func withConditions(wl *kueue.Workload, conds ...metav1.Condition) *kueue.Workload {
	for _, c := range conds {
		c.LastTransitionTime = metav1.NewTime(sharedtest.Now)
		wl.Status.Conditions = append(wl.Status.Conditions, c)
	}
	return wl
}

// pendingWorkloadOf is Kueue's Workload of the Job r1-1, waiting for quota
// with the scheduler's message msg.
func pendingWorkloadOf(msg string) *kueue.Workload {
	wl := workloadOf(false)
	wl.Status.Conditions = nil
	return withConditions(wl, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: msg})
}

// lastAttempt is the run's current (or last) attempt.
func lastAttempt(t testing.TB, run *taugridv1.TauRun) taugridv1.Attempt {
	t.Helper()
	if len(run.Status.Attempts) == 0 {
		t.Fatal("the run records no attempt")
	}
	return run.Status.Attempts[len(run.Status.Attempts)-1]
}
