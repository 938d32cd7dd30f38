package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/test/controlplane"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// A run the manager dispatched and no worker admits waits in the workers'
// words, not the manager's "waiting for admission checks": each worker
// says why it cannot hold the run (16 GPUs: large holds at most 8, small
// none), read from its own copy of the Workload.
func TestADispatchedRunWaitsInTheWorkersWords(t *testing.T) {
	// A fleet of its own: on the shared one, the GPUs an earlier test's
	// attempt still holds on a worker (its evidence held until sealed)
	// change what the workers say and where the run fits.
	fl := ownFleet(t, controlplane.FleetOptions{Workers: []string{"small", "large"}})
	f := newRunFixture(t, "mc3")
	dispatchTenant(t, fl, f, "mc3-a")
	create(t, k8s, tenantPVC(f.ns))
	endAttemptsLeft(t, fl, f.ns) // the run never fits: its Job goes, and MultiKueue's copies with it
	m := startManagerWith(t, withWorkers)
	defer m.stop()

	f.research.runRef("big", "target: ddp\noverrides:\n  storage.data_pvc: mc3-a-data\n") // 2 × 8 GPUs: the manager lends 8 of them from the cohort
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/big")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run: %s %q, workload %+v", run.Status.Phase, run.Status.Message, run.Status.Workload)
			logDispatch(t, f.ns, k8s)
		}
		_ = k8s.Delete(context.Background(), run) // no later manager of the shared fleet resubmits it
	})
	waitFor(t, 90*time.Second, "the manager to make the run's Workload", func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Workload != nil && run.Status.Workload.Workload != ""
	})
	// Each worker explains only once its copy exists and its Kueue has
	// tried it: wait for both, not for the first to answer.
	key := client.ObjectKey{Namespace: f.ns, Name: run.Status.Workload.Workload}
	for _, name := range []string{"large", "small"} {
		w := workerClient(t, fl, name)
		waitFor(t, 90*time.Second, "worker "+name+"'s Kueue to find no room for its copy of the Workload", func() bool {
			var wl kueue.Workload
			if w.Get(context.Background(), key, &wl) != nil {
				return false
			}
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			return c != nil && c.Status == metav1.ConditionFalse && c.Message != ""
		})
	}
	waitFor(t, 90*time.Second, "the dispatched run to wait in both workers' words", func() bool {
		run = getRun(t, f.ns, run.Name)
		return strings.Contains(run.Status.Message, "dispatched, not yet admitted by a worker") && run.Status.Workload != nil &&
			strings.Contains(run.Status.Workload.Reason, "Worker large: cannot run") && strings.Contains(run.Status.Workload.Reason, "Worker small: cannot run")
	})
	t.Logf("%s: %q\n%s", run.Status.Phase, run.Status.Message, run.Status.Workload.Reason)
	if run.Status.Phase != taugridv1.PhaseQueued {
		t.Errorf("the run is %s, want Queued", run.Status.Phase)
	}
	if want := "dispatched, not yet admitted by a worker; large: cannot run: asks 16 nvidia.com/gpu, queue runs can hold at most 8"; !strings.HasPrefix(run.Status.Message, want) {
		t.Errorf("the run's message is %q, want it to start %q", run.Status.Message, want)
	}
	for _, want := range []string{"small: cannot run: asks 16 nvidia.com/gpu, queue runs can hold at most 0", "Worker large: cannot run",
		"Kueue: couldn't assign flavors", "Worker small: cannot run", "waiting for admission checks: tau-dispatch-mc3-a"} {
		if !strings.Contains(run.Status.Workload.Reason, want) {
			t.Errorf("the run's wait explanation lacks %q:\n%s", want, run.Status.Workload.Reason)
		}
	}
	rep, err := runs.ReportQueue(context.Background(), k8s, f.ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || !strings.Contains(rep.Runs[0].Message, "large: cannot run") {
		t.Errorf("tau queue shows %+v, want the run with the workers' reasons", rep.Runs)
	}
}
