package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/janitor"
	"github.com/taugrid/taugrid/controllers/shared"
)

// plantJob submits a suspended 1-GPU Job labelled as TauGrid's, with no run
// following it, and waits until Kueue admits it.
func plantJob(t *testing.T, ns, name string) (*batchv1.Job, *kueue.Workload) {
	t.Helper()
	return plantLabelledJob(t, ns, name, map[string]string{render.LabelManagedBy: render.ManagedBy, render.LabelQueueName: "runs"})
}

// plantLabelledJob is plantJob with the Job's labels (the queue's among them).
func plantLabelledJob(t *testing.T, ns, name string, labels map[string]string) (*batchv1.Job, *kueue.Workload) {
	t.Helper()
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "python:3.12", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}},
	}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var wl *kueue.Workload
	waitFor(t, 20*time.Second, "the planted Job admitted", func() bool {
		var wls kueue.WorkloadList
		if err := k8s.List(ctx, &wls, client.InNamespace(ns), client.MatchingLabels{shared.KueueJobUID: string(job.UID)}); err != nil || len(wls.Items) == 0 {
			return false
		}
		wl = &wls.Items[0]
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
	return job, wl
}

// inNamespace keeps the findings about ns's objects: the janitor sweeps the
// whole cluster, where earlier tests left their own (a Job the run
// reconciler replaced leaves its Workload to a garbage collector this
// cluster does not run).
func inNamespace(ns string, found []janitor.Finding) []janitor.Finding {
	var mine []janitor.Finding
	for _, f := range found {
		if parts := strings.SplitN(f.Object, "/", 3); len(parts) == 3 && parts[1] == ns {
			mine = append(mine, f)
		}
	}
	return mine
}

func deleted(t *testing.T, o client.Object) bool {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(o), o)
	return apierrors.IsNotFound(err) || err == nil && !o.GetDeletionTimestamp().IsZero()
}

func TestTheJanitorReleasesPlantedIdleReservationsOrphansAndStuckPods(t *testing.T) {
	f := newRunFixture(t, "rj1")
	ctx := context.Background()
	idleJob, idleWL := plantJob(t, f.ns, "planted-idle")
	orphanJob, orphanWL := plantJob(t, f.ns, "planted-orphan")
	// TauGrid's by its labels, as a Kueue that copies TauGrid's labels makes it.
	patch := client.MergeFrom(orphanWL.DeepCopy())
	orphanWL.Labels[render.LabelManagedBy] = render.ManagedBy
	if err := k8s.Patch(ctx, orphanWL, patch); err != nil {
		t.Fatal(err)
	}
	// Its Job goes; the test cluster runs no garbage collector to take the Workload.
	if err := k8s.Delete(ctx, orphanJob, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	stuck := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: f.ns, Labels: map[string]string{render.LabelManagedBy: render.ManagedBy}},
		Spec: corev1.PodSpec{NodeName: "rj1-lost-node", Containers: []corev1.Container{{Name: "main", Image: "python:3.12"}}}}
	if err := k8s.Create(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, stuck); err != nil { // no kubelet will ever confirm it
		t.Fatal(err)
	}

	clk := clocktesting.NewFakePassiveClock(time.Now())
	j := &janitor.Janitor{Client: k8s, Clock: clk, Recorder: events.NewFakeRecorder(100), Log: logr.Discard(), Mode: janitor.JanitorReport, IdleAfter: time.Minute}
	found, err := j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if found = inNamespace(f.ns, found); len(found) != 1 || found[0].Reason != janitor.ReasonOrphanedReservation {
		t.Fatalf("within a minute: %+v; want only the orphan (it can never become useful)", found)
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	if found, err = j.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, f := range inNamespace(f.ns, found) {
		reasons[f.Reason] = true
	}
	for _, r := range []string{janitor.ReasonOrphanedReservation, janitor.ReasonIdleReservation, janitor.ReasonStuckTerminating} {
		if !reasons[r] {
			t.Errorf("report mode found %+v, want a %s", found, r)
		}
	}
	if deleted(t, idleJob.DeepCopy()) || deleted(t, orphanWL.DeepCopy()) {
		t.Fatalf("report mode deleted something")
	}

	j.Mode = janitor.JanitorRelease
	if _, err := j.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{idleJob, idleWL, orphanWL} {
		if !deleted(t, o) {
			t.Errorf("%T %s was not released", o, o.GetName())
		}
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stuck), stuck); !apierrors.IsNotFound(err) {
		t.Errorf("the stuck pod is still there: %v", err)
	}
	// The quota is back: new Jobs are admitted at once.
	plantJob(t, f.ns, "after-1")
	plantJob(t, f.ns, "after-2")
}

// The janitor judges only TauGrid's orphans: a Workload whose job a TauRun
// records as its attempt goes, another controller's orphaned Workload stays,
// in every mode; and a pod that still holds a GPU for a run that ended is
// released with what would recreate it, while a live attempt's pods stay.
func TestTheJanitorReleasesOnlyTauGridsOrphansAndPodsOfEndedRuns(t *testing.T) {
	f := newRunFixture(t, "rj2")
	ctx := context.Background()
	f.research.runRef("orphaned", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/orphaned")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	ourJob := &batchv1.Job{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: render.WorkloadName(run.Name, 1)}, ourJob); err != nil {
		t.Fatal(err)
	}
	var wls kueue.WorkloadList
	if err := k8s.List(ctx, &wls, client.InNamespace(f.ns), client.MatchingLabels{shared.KueueJobUID: string(ourJob.UID)}); err != nil || len(wls.Items) != 1 {
		t.Fatalf("the run's Workload: %v %v", wls.Items, err)
	}
	ourWL := &wls.Items[0]
	// Someone else's Job, named like an attempt of a run that does not exist.
	foreignJob, foreignWL := plantLabelledJob(t, f.ns, "train-1", map[string]string{render.LabelQueueName: "runs"})
	for _, j := range []*batchv1.Job{ourJob, foreignJob} { // no garbage collector takes their Workloads
		if err := k8s.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
	gpuPod := func(name, run string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{
			render.LabelManagedBy: render.ManagedBy, render.LabelRun: run, render.LabelAttempt: "1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "python:3.12", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ended := gpuPod("rj2-ended-head", "rj2-gone-run") // its run was deleted, its pod was not
	live := gpuPod("rj2-live-worker", run.Name)       // the run's attempt 1 goes on

	j := &janitor.Janitor{Client: k8s, Clock: clocktesting.NewFakePassiveClock(time.Now()), Recorder: events.NewFakeRecorder(100), Log: logr.Discard(),
		Mode: janitor.JanitorReport, IdleAfter: time.Hour}
	found, err := j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range inNamespace(f.ns, found) {
		got[f.Object] = f.Reason
	}
	want := map[string]string{"Workload/" + f.ns + "/" + ourWL.Name: janitor.ReasonOrphanedReservation, "Pod/" + f.ns + "/" + ended.Name: janitor.ReasonEndedRunPod}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report mode found (-want +got):\n%s", diff)
	}
	j.Mode = janitor.JanitorRelease
	if _, err := j.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{ourWL, ended} {
		if !deleted(t, o) {
			t.Errorf("%T %s was not released", o, o.GetName())
		}
	}
	for _, o := range []client.Object{foreignWL, live} {
		if deleted(t, o) {
			t.Errorf("%T %s, not TauGrid's to judge, was deleted", o, o.GetName())
		}
	}
}
