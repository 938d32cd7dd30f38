package run

import (
	"context"
	"errors"
	"k8s.io/utils/ptr"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// staleStatus refuses a run's status patch as the API server refuses one
// computed from a copy older than the stored run, while *stale holds.
func staleStatus(stale *bool) *interceptor.Funcs {
	return &interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		if _, ok := o.(*taugridv1.TauRun); ok && *stale {
			return apierrors.NewConflict(schema.GroupResource{Group: "taugrid.dev", Resource: "tauruns"}, o.GetName(), errStaleCopy)
		}
		return c.SubResource(sub).Patch(ctx, o, p, opts...)
	}}
}

var errStaleCopy = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// A reconcile that worked from a stale copy of the run gets a conflict on
// its status patch: it is looked at again at once, with no error's backoff,
// and nothing that follows from the status (the Submitted event, the
// release of an ended attempt) happens until a patch is stored.
func TestAStatusPatchFromAStaleCopyIsRetriedAtOnce(t *testing.T) {
	lostNodePod := builders.MakeAttemptPod("r1-1-0", ns, "r1", 1).OnNode("gone").Running().Obj()
	cases := map[string]struct {
		objs  []client.Object
		phase taugridv1.RunPhase // once the patch is stored
		kept  []client.Object    // while the status is refused
	}{
		"a new run's submission": {
			objs:  []client.Object{builders.MakeTauRun("r1", ns).UID("u1").Obj()},
			phase: taugridv1.PhaseQueued},
		"a queued run Kueue admitted": {
			objs:  []client.Object{submitted(taugridv1.PhaseQueued), job(builders.MakeJob("r1-1", ns).Unsuspended()), workloadOf(true)},
			phase: taugridv1.PhaseAdmitted},
		"an attempt that lost its node: its pod is released only once the end is stored": {
			objs: []client.Object{submitted(taugridv1.PhaseRunning), job(builders.MakeJob("r1-1", ns).Unsuspended().Condition(batchv1.JobFailed, "PodFailurePolicy", "")),
				workloadOf(true), lostNodePod},
			phase: taugridv1.PhasePending, kept: []client.Object{lostNodePod}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stale := true
			w := newRunWorld(t, staleStatus(&stale), tc.objs...)
			before := w.run(t, "r1")
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatalf("reconcile: %v, want no error: a conflict is no failure", err)
			}
			if res.RequeueAfter != 50*time.Millisecond {
				t.Errorf("requeue after %s, want 50ms", res.RequeueAfter)
			}
			got := w.run(t, "r1")
			if got.Status.Phase != before.Status.Phase || got.Status.ObservedGeneration != before.Status.ObservedGeneration {
				t.Errorf("phase %s, observedGeneration %d stored despite the conflict", got.Status.Phase, got.Status.ObservedGeneration)
			}
			for _, e := range w.reasons() {
				if e == "Normal "+ReasonSubmitted {
					t.Error("a submission announced though its status was not stored")
				}
			}
			for _, o := range tc.kept {
				if !w.holds(t, o) {
					t.Errorf("%T %s released before the attempt's end was stored", o, o.GetName())
				}
			}

			stale = false
			_, err = w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			got = w.run(t, "r1")
			if got.Status.Phase != tc.phase || got.Status.ObservedGeneration != got.Generation {
				t.Errorf("phase %s (%s), observedGeneration %d after the fresh look; want %s, %d",
					got.Status.Phase, got.Status.Message, got.Status.ObservedGeneration, tc.phase, got.Generation)
			}
			if n := len(w.jobs(t)); n != 1 || len(got.Status.Attempts) != 1 {
				t.Errorf("%d Jobs, %d attempts: want the one attempt, its Job adopted, not submitted twice", n, len(got.Status.Attempts))
			}
			for _, o := range tc.kept {
				if w.holds(t, o) {
					t.Errorf("%T %s still there once the end was stored", o, o.GetName())
				}
			}
		})
	}
}

// unrecordedJob is a new run's world after its first submission, whose
// status write was refused: its Job stands, and no status records it.
func unrecordedJob(t *testing.T) (*runWorld, *batchv1.Job) {
	t.Helper()
	stale := true
	w := newRunWorld(t, staleStatus(&stale), builders.MakeTauRun("r1", ns).UID("u1").Obj())
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	stale = false
	return w, &w.jobs(t)[0]
}

// TestAJobUnderTheRunsNameIsAdoptedOnlyIfItIsWhatTheRunRenders: a Job that
// stands under the run's next workload name, controlled by the run, but
// that no status recorded, is adopted when it is exactly what the run
// renders (a create whose status patch was refused); one made by someone
// else (not the run's, or the run's with another image) is deleted and
// made again, never recorded.
func TestAJobUnderTheRunsNameIsAdoptedOnlyIfItIsWhatTheRunRenders(t *testing.T) {
	for name, tc := range map[string]struct {
		change  func(*batchv1.Job)
		adopted bool
	}{
		"the run's own, as rendered": {change: func(*batchv1.Job) {}, adopted: true},
		"the run's, another image":   {change: func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "evil/miner" }},
		"not the run's":              {change: func(j *batchv1.Job) { j.OwnerReferences = nil }},
		// Started: past a queue without the admission check, which admits
		// nothing unrecorded; cutting it short protects nothing.
		"the run's, already started by Kueue": {change: func(j *batchv1.Job) {
			j.Spec.Suspend = ptr.To(false)
			j.Spec.Template.Spec.NodeSelector = map[string]string{"flavor": "injected"}
		}, adopted: true},
	} {
		t.Run(name, func(t *testing.T) {
			w, j := unrecordedJob(t)
			tc.change(j)
			if err := w.c.Update(context.Background(), j); err != nil {
				t.Fatal(err)
			}
			_, err := w.reconcile(t, "r1")
			run := w.run(t, "r1")
			if tc.adopted {
				if err != nil || run.Status.Workload == nil || run.Status.Workload.Name != j.Name {
					t.Fatalf("reconcile %v, workload %+v; want the Job adopted", err, run.Status.Workload)
				}
				return
			}
			if !errors.Is(err, errStaleRun) || run.Status.Workload != nil || len(w.jobs(t)) != 0 {
				t.Fatalf("reconcile %v, workload %+v, %d Jobs; want the Job deleted and nothing recorded", err, run.Status.Workload, len(w.jobs(t)))
			}
			if _, err := w.reconcile(t, "r1"); err != nil {
				t.Fatal(err)
			}
			if jobs := w.jobs(t); len(jobs) != 1 || jobs[0].Spec.Template.Spec.Containers[0].Image == "evil/miner" {
				t.Errorf("after the next look: %d Jobs; want the run's own made again", len(jobs))
			}
		})
	}
}

// A Job deleted as unrecorded takes its Kueue Workload with it, and the
// run makes its Job again only once no Workload of an earlier Job of that
// name stands: Kueue matches a Job to a Workload by the Job's name, and
// would start the new Job under the old one's admission while the run
// waited for a Workload of its own.
func TestAJobIsMadeAgainOnlyOnceTheOldOnesWorkloadIsGone(t *testing.T) {
	t.Run("the unrecorded Job's own Workload goes with it", func(t *testing.T) {
		w, j := unrecordedJob(t)
		j.Spec.Template.Spec.Containers[0].Image = "evil/miner"
		if err := w.c.Update(context.Background(), j); err != nil {
			t.Fatal(err)
		}
		wl := workloadOf(true)
		wl.Labels[shared.KueueJobUID], wl.OwnerReferences[0].UID = string(j.UID), j.UID
		if err := w.c.Create(context.Background(), wl); err != nil {
			t.Fatal(err)
		}
		if _, err := w.reconcile(t, "r1"); !errors.Is(err, errStaleRun) {
			t.Fatalf("reconcile: %v, want the unrecorded Job deleted", err)
		}
		if w.holds(t, wl) {
			t.Error("the deleted Job's Workload is still there: Kueue would give it to the Job made again")
		}
		if _, err := w.reconcile(t, "r1"); err != nil || len(w.jobs(t)) != 1 {
			t.Fatalf("reconcile: %v, %d Jobs; want the run's own Job made again", err, len(w.jobs(t)))
		}
	})
	t.Run("a Workload left by an earlier Job holds the submission back until it is gone", func(t *testing.T) {
		wl := workloadOf(true)
		wl.Finalizers = []string{"kueue.x-k8s.io/resource-in-use"} // Kueue lets it go once it sees its Job gone
		w := newRunWorld(t, nil, builders.MakeTauRun("r1", ns).UID("u1").Obj(), wl)
		res, err := w.reconcile(t, "r1")
		if err != nil || res.RequeueAfter != time.Second {
			t.Fatalf("reconcile: %v, requeue after %s; want a wait of 1s", err, res.RequeueAfter)
		}
		run := w.run(t, "r1")
		if n := len(w.jobs(t)); n != 0 || run.Status.Workload != nil {
			t.Fatalf("%d Jobs, workload %+v while the old Workload stands; want none", n, run.Status.Workload)
		}
		if want := "waiting for Kueue to remove the Workload job-r1-1 of an earlier Job r1-1 before making it again"; run.Status.Phase != taugridv1.PhasePending || run.Status.Message != want {
			t.Errorf("%s: %q; want Pending: %q", run.Status.Phase, run.Status.Message, want)
		}
		left := &kueue.Workload{}
		if err := w.c.Get(context.Background(), client.ObjectKeyFromObject(wl), left); err != nil || left.DeletionTimestamp.IsZero() {
			t.Fatalf("the old Workload: %v, deletion %v; want it being deleted", err, left.DeletionTimestamp)
		}
		if _, err := w.reconcile(t, "r1"); err != nil || len(w.jobs(t)) != 0 {
			t.Fatalf("reconcile: %v, %d Jobs; want still none while it is being deleted", err, len(w.jobs(t)))
		}
		left.Finalizers = nil
		if err := w.c.Update(context.Background(), left); err != nil {
			t.Fatal(err)
		}
		if _, err := w.reconcile(t, "r1"); err != nil {
			t.Fatal(err)
		}
		if run := w.run(t, "r1"); len(w.jobs(t)) != 1 || run.Status.Phase != taugridv1.PhaseQueued {
			t.Errorf("%d Jobs, phase %s once the Workload is gone; want the Job made, Queued", len(w.jobs(t)), run.Status.Phase)
		}
	})
	t.Run("a Job Kueue changes while it is compared is looked at again, not deleted", func(t *testing.T) {
		stale, busy := true, true
		faults := staleStatus(&stale)
		faults.Update = func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			if _, ok := o.(*batchv1.Job); ok && busy {
				return apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, o.GetName(), errStaleCopy)
			}
			return c.Update(ctx, o, opts...)
		}
		w := newRunWorld(t, faults, builders.MakeTauRun("r1", ns).UID("u1").Obj())
		if _, err := w.reconcile(t, "r1"); err != nil {
			t.Fatal(err)
		}
		stale = false
		made := w.jobs(t)[0].UID
		if _, err := w.reconcile(t, "r1"); !errors.Is(err, errStaleRun) {
			t.Fatalf("reconcile: %v; want a fresh look", err)
		}
		if jobs := w.jobs(t); len(jobs) != 1 || jobs[0].UID != made {
			t.Fatalf("%d Jobs; want the run's own Job kept", len(jobs))
		}
		busy = false
		if _, err := w.reconcile(t, "r1"); err != nil {
			t.Fatal(err)
		}
		if run := w.run(t, "r1"); run.Status.Workload == nil || run.Status.Workload.UID != made {
			t.Errorf("workload %+v; want the Job adopted", run.Status.Workload)
		}
	})
}
