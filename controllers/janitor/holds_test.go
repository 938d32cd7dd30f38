package janitor

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSweepStaleHolds covers staleHolds: on each MultiKueue worker, the
// Jobs held for evidence (FinalizerEvidence) whose run is gone, whose run
// has no such attempt, or whose attempt ended with its evidence sealed are
// released, in report mode too (the hold is TauGrid's own and holds no
// quota), with no event (the Job is on the worker); holds still needed
// are kept; a worker that cannot be read is left for the next sweep.
func TestSweepStaleHolds(t *testing.T) {
	held := func() *builders.JobBuilder { return builders.MakeJob("train-1", ns).EvidenceHeld("train", 1) }
	run := func() *builders.TauRunBuilder { return builders.MakeTauRun("train", ns) }
	stale := func(cluster, why string) Finding {
		return Finding{Reason: ReasonStaleHold, Object: "Job/team-a/train-1", Message: "held on worker cluster " + cluster + " for evidence, yet " + why}
	}
	worker := func(name string) client.Object {
		return clusters.Cluster(clusters.Worker{Name: name, Secret: name + "-kubeconfig"})
	}
	cases := map[string]struct {
		objs     []client.Object // the manager's
		workers  map[string]any  // a worker's objects ([]client.Object), or the error reaching it
		want     []Finding
		released []string // worker/Job whose hold goes
	}{
		"a hold whose run is gone is released": {
			objs:    []client.Object{worker("worker-1")},
			workers: map[string]any{"worker-1": []client.Object{held().Obj()}},
			want:    []Finding{stale("worker-1", "its run is gone")}, released: []string{"worker-1/train-1"},
		},
		"a hold that no attempt of its run is": {
			objs:    []client.Object{worker("worker-1"), run().Attempt("train-9", ago(time.Hour), time.Time{}, "").Obj()},
			workers: map[string]any{"worker-1": []client.Object{held().Obj()}},
			want:    []Finding{stale("worker-1", "no attempt of its run is this Job")}, released: []string{"worker-1/train-1"},
		},
		"a hold of an attempt that ended, its evidence sealed": {
			objs: []client.Object{worker("worker-1"), run().Phase(taugridv1.PhaseFailed, "").Attempt("train-1", ago(time.Hour), ago(time.Minute), "").
				Condition(shared.ConditionEvidence, metav1.ConditionTrue, "Sealed", "").Obj()},
			workers: map[string]any{"worker-1": []client.Object{held().Obj()}},
			want:    []Finding{stale("worker-1", "attempt 1 ended and its evidence is sealed")}, released: []string{"worker-1/train-1"},
		},
		"a hold of an attempt that ended, its evidence still sealing, is kept": {
			objs: []client.Object{worker("worker-1"), run().Phase(taugridv1.PhaseFailed, "").Attempt("train-1", ago(time.Hour), ago(time.Minute), "").
				Condition(shared.ConditionEvidence, metav1.ConditionFalse, shared.ReasonSealing, "").Obj()},
			workers: map[string]any{"worker-1": []client.Object{held().Obj()}},
		},
		"a hold of an attempt still running is kept": {
			objs:    []client.Object{worker("worker-1"), run().Phase(taugridv1.PhaseRunning, "").Attempt("train-1", ago(time.Hour), time.Time{}, "").Obj()},
			workers: map[string]any{"worker-1": []client.Object{held().Obj()}},
		},
		"a Job not held is not looked at, its run gone or not": {
			objs: []client.Object{worker("worker-1")},
			workers: map[string]any{"worker-1": []client.Object{func() client.Object {
				j := held().Obj()
				j.Finalizers = []string{"example.com/other"}
				return j
			}()}},
		},
		"a worker that cannot be read is left for the next sweep; the others are swept": {
			objs:     []client.Object{worker("worker-1"), worker("worker-2")},
			workers:  map[string]any{"worker-1": errors.New("worker-1: connection refused"), "worker-2": []client.Object{held().Obj()}},
			want:     []Finding{stale("worker-2", "its run is gone")},
			released: []string{"worker-2/train-1"},
		},
	}
	for name, tc := range cases {
		for _, mode := range []JanitorMode{JanitorReport, JanitorRelease} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				ws := workers{}
				for cluster, v := range tc.workers {
					if objs, ok := v.([]client.Object); ok {
						v = sharedtest.NewClient(objs...)
					}
					ws[cluster] = v
				}
				w := newJanitor(t, mode, ws, tc.objs...)
				before := heldJobs(t, ws)
				found, err := w.j.Sweep(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, found); diff != "" {
					t.Errorf("findings (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.released, released(before, heldJobs(t, ws))); diff != "" {
					t.Errorf("holds released (-want +got):\n%s", diff)
				}
				if len(w.deleted) != 0 {
					t.Errorf("deleted %v; a stale hold is released, never deleted", w.deleted)
				}
				if evs := w.drain(); len(evs) != 0 {
					t.Errorf("events %v, want none", evs)
				}
				checkMetrics(t, w.j.Metrics, tc.want, "released")
			})
		}
	}
}

// TestSweepWithoutWorkersReleasesNoHolds: a janitor with no workers to
// reach (one cluster) does not look for holds, even where MultiKueue
// objects exist.
func TestSweepWithoutWorkersReleasesNoHolds(t *testing.T) {
	w := newJanitor(t, JanitorRelease, nil, clusters.Cluster(clusters.Worker{Name: "worker-1", Secret: "k"}),
		builders.MakeJob("train-1", ns).EvidenceHeld("train", 1).Obj())
	found, err := w.j.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 0 {
		t.Errorf("found %+v, want nothing", found)
	}
	job := &batchv1.Job{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "train-1"}, job); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{taugridv1.FinalizerEvidence}, job.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
}

// heldJobs names, as "worker/job", the Jobs on the workers held by
// FinalizerEvidence.
func heldJobs(t *testing.T, ws workers) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for cluster, v := range ws {
		c, ok := v.(client.Client)
		if !ok {
			continue
		}
		var jobs batchv1.JobList
		if err := c.List(context.Background(), &jobs); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			if slices.Contains(j.Finalizers, taugridv1.FinalizerEvidence) {
				out[cluster+"/"+j.Name] = true
			}
		}
	}
	return out
}

// released is what was held before and is not after, sorted.
func released(before, after map[string]bool) []string {
	var out []string
	for _, h := range slices.Sorted(maps.Keys(before)) {
		if !after[h] {
			out = append(out, h)
		}
	}
	return out
}
