package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRestartingTheControllerNeverDuplicatesOrLosesARun pushes 50 run refs
// while restarting the controller at random points, with no state carried
// between instances: every ref still gets exactly one TauRun and one Job.
func TestRestartingTheControllerNeverDuplicatesOrLosesARun(t *testing.T) {
	f := newRunFixture(t, "rt8")
	patch := client.MergeFrom(f.repo.DeepCopy())
	f.repo.Spec.Interval.Duration = time.Second
	if err := k8s.Patch(context.Background(), f.repo, patch); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 50))
	const runs = 50
	start := time.Now()
	m := startManager(t)
	restarts := 0
	for i := range runs {
		f.research.runRef(fmt.Sprintf("c-%02d", i), "target: default\n")
		if err := m.nudger.NudgeRepository(context.Background(), f.repo.Namespace, f.repo.Name, 0); err != nil {
			t.Fatal(err)
		}
		if rng.Float64() < 0.2 {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			m.stop()
			m = startManager(t)
			restarts++
		}
	}
	defer m.stop()
	t.Logf("pushed %d run refs in %s", runs, time.Since(start))
	submitted := func() (int, int) {
		var list taugridv1.TauRunList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range list.Items {
			if r.Status.Workload != nil {
				n++
			}
		}
		return len(list.Items), n
	}
	waitFor(t, 90*time.Second, "every run submitted", func() bool {
		total, withJob := submitted()
		return total == runs && withJob == runs
	})
	total, _ := submitted()
	if jobs := len(f.jobs(t)); total != runs || jobs != runs {
		t.Errorf("after %d restarts: %d TauRuns and %d Jobs for %d run refs, want %d of each", restarts, total, jobs, runs, runs)
	}
	t.Logf("all submitted after %s", time.Since(start))
	t.Logf("%d run refs, %d controller restarts: %d TauRuns, %d Jobs", runs, restarts, total, len(f.jobs(t)))
}
