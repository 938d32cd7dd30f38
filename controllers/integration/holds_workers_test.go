package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/controllers/janitor"
	"github.com/taugrid/taugrid/controllers/shared"
)

// A hold on a worker's Job never outlives its run: the janitor lets go of
// the Jobs held for a run that is gone and for an attempt whose bundle is
// sealed, keeps those of a running attempt and of one being sealed, and a
// worker it cannot reach holds up none of that.
func TestAHoldOnAWorkerNeverOutlivesItsRun(t *testing.T) {
	fl := onFleet(t)
	ctx := context.Background()
	large := workerClient(t, fl, "large")
	ns := createNamespace(t, "mr7-")
	create(t, large, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	// Shared by every fleet test: the first makes it.
	if err := k8s.Create(ctx, clusters.Cluster(clusters.Worker{Name: "large", Secret: controlplane.KubeconfigSecret("large")})); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	unreachableWorker(t, "mr7-gone")

	now := metav1.Now()
	sealed := []metav1.Condition{{Type: shared.ConditionEvidence, Status: metav1.ConditionTrue, Reason: shared.ReasonEvidenceSealed, Message: "sealed", LastTransitionTime: now}}
	beingSealed := []metav1.Condition{{Type: shared.ConditionEvidence, Status: metav1.ConditionFalse, Reason: shared.ReasonSealing, Message: "sealing", LastTransitionTime: now}}
	heldRun(t, ns, "live", taugridv1.PhaseRunning, nil, nil)
	heldRun(t, ns, "sealed", taugridv1.PhaseFailed, &now, sealed)
	heldRun(t, ns, "sealing", taugridv1.PhaseFailed, &now, beingSealed)
	for _, run := range []string{"gone", "live", "sealed", "sealing"} {
		heldJob(t, large, ns, run)
	}

	workers := &clusters.Workers{Local: &clusters.Pods{Reader: k8s}, Manager: k8s, Namespace: controlplane.KueueNamespace, Scheme: scheme,
		CallTimeout: 2 * time.Second}
	j := &janitor.Janitor{Client: k8s, Clock: clock.RealClock{}, Recorder: events.NewFakeRecorder(100), Log: logr.Discard(), Mode: janitor.JanitorReport,
		EndedAfter: time.Hour, Clusters: workers}
	found, err := j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var released []string
	for _, f := range found {
		if f.Reason == janitor.ReasonStaleHold && strings.HasPrefix(f.Object, "Job/"+ns+"/") {
			released = append(released, strings.TrimPrefix(f.Object, "Job/"+ns+"/"))
		}
	}
	slices.Sort(released)
	if want := []string{render.WorkloadName("gone", 1), render.WorkloadName("sealed", 1)}; !slices.Equal(released, want) {
		t.Errorf("the janitor released the holds of %v; want %v (run gone, bundle sealed)", released, want)
	}
	for run, want := range map[string]bool{"gone": false, "sealed": false, "live": true, "sealing": true} {
		job := &batchv1.Job{}
		if err := large.Get(ctx, client.ObjectKey{Namespace: ns, Name: render.WorkloadName(run, 1)}, job); err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(job.Finalizers, taugridv1.FinalizerEvidence); got != want {
			t.Errorf("run %s's Job on the worker held: %v, want %v", run, got, want)
		}
	}
}

// heldRun creates a run whose one attempt ran on worker large.
func heldRun(t *testing.T, ns, name string, phase taugridv1.RunPhase, ended *metav1.Time, conds []metav1.Condition) {
	t.Helper()
	run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: taugridv1.TauRunSpec{Repository: "r", Commit: strings.Repeat("a", 40), Target: "default",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: "refs/tau/runs/" + name, Requester: "mr7@example.com"}}}
	create(t, k8s, run)
	job := render.WorkloadName(name, 1)
	run.Status = taugridv1.TauRunStatus{Phase: phase, Message: string(phase), Conditions: conds,
		Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: job, Queue: "runs", Admitted: true, Cluster: "large"},
		Attempts: []taugridv1.Attempt{{Number: 1, Workload: job, Cluster: "large", EndTime: ended}}}
	if err := k8s.Status().Update(context.Background(), run); err != nil {
		t.Fatal(err)
	}
}

// heldJob creates, on worker w, run's suspended attempt-1 Job held for
// its evidence, and lets go of it when the test ends.
func heldJob(t *testing.T, w client.Client, ns, run string) {
	t.Helper()
	labels := map[string]string{render.LabelManagedBy: render.ManagedBy, render.LabelRun: run, render.LabelAttempt: "1"}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: render.WorkloadName(run, 1), Namespace: ns, Labels: labels,
		Finalizers: []string{taugridv1.FinalizerEvidence}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
	create(t, w, job)
	t.Cleanup(func() {
		_ = w.Patch(context.Background(), job, shared.ReleasePatch)
		_ = w.Delete(context.Background(), job)
	})
}

// unreachableWorker declares worker name in the manager, at an address
// nothing answers, until the test ends.
func unreachableWorker(t *testing.T, name string) {
	t.Helper()
	kubeconfig := "apiVersion: v1\nkind: Config\ncurrent-context: gone\n" +
		"clusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:1\n" +
		"contexts:\n- name: gone\n  context:\n    cluster: gone\n    user: gone\n" +
		"users:\n- name: gone\n  user:\n    token: t\n"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.KueueNamespace, Name: name + "-kubeconfig"},
		Data: map[string][]byte{clusters.KubeconfigKey: []byte(kubeconfig)}}
	mkc := clusters.Cluster(clusters.Worker{Name: name, Secret: secret.Name})
	create(t, k8s, secret, mkc)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), mkc); _ = k8s.Delete(context.Background(), secret) })
}
