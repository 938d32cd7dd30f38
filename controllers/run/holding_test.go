package run

import (
	"context"
	"fmt"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// heldQueue is a ClusterQueue held by n admitted runs of 8 GPUs, each
// with a 2-hour limit, their Jobs not started yet, in a fake client.
func heldQueue(t testing.TB, n int, admittedAt time.Time) (client.Client, *kueue.ClusterQueue, []*kueue.Workload) {
	t.Helper()
	cq := builders.MakeClusterQueue("team-a").Quota("h200", "nvidia.com/gpu", fmt.Sprint(8*n), "0").Obj()
	cq.ResourceVersion = "7"
	gpus := corev1.ResourceList{runs.GPU: resource.MustParse("8")}
	var objs []client.Object
	var admitted []*kueue.Workload
	for i := range n {
		name := fmt.Sprintf("r%04d-1", i)
		w := builders.MakeWorkload("job-"+name+"-abcde", "team-a").UID(name).ControlledByJob(name).AdmittedBy("team-a", admittedAt).Obj()
		w.Spec.PodSets = []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}}}}}
		j := builders.MakeJob(name, "team-a").Obj()
		j.Spec.ActiveDeadlineSeconds = ptr.To[int64](7200)
		objs = append(objs, j)
		admitted = append(admitted, w)
	}
	return sharedtest.NewClient(objs...), cq, admitted
}

// startJob sets the Job's start, as the Job controller does once it syncs
// the Job Kueue unsuspended.
func startJob(t *testing.T, c client.Client, name string, at time.Time) {
	t.Helper()
	j := &batchv1.Job{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, j); err != nil {
		t.Fatal(err)
	}
	j.Status.StartTime = &metav1.Time{Time: at}
	if err := c.Status().Update(context.Background(), j); err != nil {
		t.Fatal(err)
	}
}

// The queued runs of a ClusterQueue that look at it within HoldersKept of
// one another read what holds it once: a Job that starts in that second
// is seen by the next look after it, or at once when Kueue has written
// the ClusterQueue since (it admitted or released a workload). With
// HoldersKept 0, every look reads it.
func TestQueuedRunsLookingWithinASecondReadWhatHoldsTheirQueueOnce(t *testing.T) {
	clock := sharedtest.Clock()
	admittedAt := clock.Now().Add(-time.Hour)
	c, cq, admitted := heldQueue(t, 2, admittedAt)
	r := &RunReconciler{Client: c, Clock: clock, HoldersKept: DefaultHoldersKept}
	ctx := context.Background()

	first := r.holdingOf(ctx, cq, admitted, clock.Now())
	if len(first.slots) != 2 || first.freedBy != nil || first.slots[0].Limit != 2*time.Hour || !first.slots[0].start.Equal(admittedAt) || first.slots[0].GPUs != 8 {
		t.Fatalf("first look: %+v; want 2 slots of 8 GPUs, 2-hour limits counted from the admission, none started", first)
	}
	startJob(t, c, "r0001-1", clock.Now())

	clock.Step(500 * time.Millisecond)
	if kept := r.holdingOf(ctx, cq, admitted, clock.Now()); kept.freedBy != nil {
		t.Errorf("a look half a second later read the queue again: the start of r0001-1 seen (%s)", kept.freedBy.Name)
	}
	if fresh := (&RunReconciler{Client: c, Clock: clock}).holdingOf(ctx, cq, admitted, clock.Now()); fresh.freedBy == nil || fresh.freedBy.Name != "job-r0001-1-abcde" {
		t.Errorf("with HoldersKept 0, a look did not read the queue again: %+v", fresh.freedBy)
	}

	clock.Step(DefaultHoldersKept)
	after := r.holdingOf(ctx, cq, admitted, clock.Now())
	if after.freedBy == nil || after.freedBy.Name != "job-r0001-1-abcde" || !after.freesBy.Equal(clock.Now().Add(-1500*time.Millisecond+2*time.Hour)) {
		t.Errorf("a look a second and a half later: frees by %s (%v); want the started r0001-1 at its start + 2 hours", after.freesBy, after.freedBy)
	}

	startJob(t, c, "r0000-1", clock.Now())
	written := cq.DeepCopy()
	written.ResourceVersion = "8"
	started := clock.Now().Truncate(time.Second) // as the API server keeps it
	if again := r.holdingOf(ctx, written, admitted, clock.Now()); !again.slots[0].start.Equal(started) {
		t.Errorf("a look at a ClusterQueue Kueue wrote since read the kept look: r0000-1 from %s, want its start %s", again.slots[0].start, started)
	}

	// What holds a queue is named to each reader as it may read it.
	h := r.holdingOf(ctx, written, admitted, clock.Now())
	if mine, theirs := describeWorkload(h.freedBy, "team-a"), describeWorkload(h.freedBy, "team-b"); mine == theirs {
		t.Errorf("the run freeing the queue is named alike to its team and another: %q", mine)
	}
}

// heldReader answers Gets of Jobs and TauRuns from maps, as the cache
// does with client.UnsafeDisableDeepCopy: a lookup and a shallow copy.
type heldReader struct {
	client.Client
	jobs map[client.ObjectKey]*batchv1.Job
	runs map[client.ObjectKey]*taugridv1.TauRun
}

func (r heldReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *batchv1.Job:
		if j, ok := r.jobs[key]; ok {
			*o = *j
			return nil
		}
	case *taugridv1.TauRun:
		if run, ok := r.runs[key]; ok {
			*o = *run
			return nil
		}
	}
	return apierrors.NewNotFound(batchv1.Resource("jobs"), key.Name)
}

// BenchmarkQueuedRunsLookingAtAQueueHeldByFourHundredRuns is one pass of
// the run reconciler over 1,000 queued runs of one ClusterQueue that 400
// admitted runs hold (hack/scale's 10,000 runs: 8,000 GPUs in 20 queues),
// each run's Job and TauRun read as from the cache: what each look reads
// of the runs holding the queue, kept for a second (cmd/tau-controller's
// DefaultHoldersKept) or read at every look (0).
func BenchmarkQueuedRunsLookingAtAQueueHeldByFourHundredRuns(b *testing.B) {
	for _, kept := range []time.Duration{0, DefaultHoldersKept} {
		b.Run(fmt.Sprintf("kept=%s", kept), func(b *testing.B) {
			clock := sharedtest.Clock()
			c, cq, admitted := heldQueue(b, 400, clock.Now().Add(-time.Hour))
			reader := heldReader{jobs: map[client.ObjectKey]*batchv1.Job{}, runs: map[client.ObjectKey]*taugridv1.TauRun{}}
			for i, w := range admitted {
				name := fmt.Sprintf("r%04d", i)
				j := &batchv1.Job{}
				if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name + "-1"}, j); err != nil {
					b.Fatal(err)
				}
				reader.jobs[client.ObjectKeyFromObject(j)] = j
				run := builders.MakeTauRun(name, "team-a").Obj()
				run.Status.Attempts = []taugridv1.Attempt{{Workload: metav1.GetControllerOfNoCopy(w).Name}}
				reader.runs[client.ObjectKeyFromObject(run)] = run
			}
			r := &RunReconciler{Client: reader, Clock: clock, HoldersKept: kept}
			b.ReportAllocs()
			for b.Loop() {
				for range 1000 {
					clock.Step(time.Millisecond) // a pass of a second
					if h := r.holdingOf(context.Background(), cq, admitted, clock.Now()); len(h.slots) != 400 {
						b.Fatalf("%d slots", len(h.slots))
					}
				}
			}
		})
	}
}
