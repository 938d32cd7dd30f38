package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/admission"
	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	"github.com/taugrid/taugrid/render"
)

// startAdmission runs TauGrid's admission controller (the check and the
// activator) as cmd/tau-controller does, on its own manager.
func startAdmission(t *testing.T) func() {
	t.Helper()
	mgr, ctx, cancel := newSuiteManager(t)
	clk := clock.RealClock{}
	for _, r := range []interface{ SetupWithManager(ctrl.Manager) error }{
		&admission.Check{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Clock: clk},
		&admission.Activator{Client: mgr.GetClient(), Clock: clk},
	} {
		if err := r.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	var done sync.WaitGroup
	done.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return func() { cancel(); done.Wait() }
}

// checkOf waits until the workload of the named Job or RayJob carries the
// platform's check in state (Rejected: or the refusal it leaves), and
// returns the state's message.
func checkOf(t *testing.T, ns, owner, check string, state kueue.CheckState) (*kueue.Workload, string) {
	t.Helper()
	var wl *kueue.Workload
	var msg string
	seen := "no workload"
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var l kueue.WorkloadList
		if k8s.List(context.Background(), &l, client.InNamespace(ns)) != nil {
			continue
		}
		for i := range l.Items {
			if ref := metav1.GetControllerOf(&l.Items[i]); ref == nil || ref.Name != owner {
				continue
			}
			seen = fmt.Sprintf("checks %+v, conditions %+v", l.Items[i].Status.AdmissionChecks, l.Items[i].Status.Conditions)
			// Kueue deactivates a rejected workload and resets its checks
			// at once; the refusal stays in TauGrid's annotation.
			if why := l.Items[i].Annotations[taugridv1.AnnotationAdmissionRefusal]; why != "" && state == kueue.CheckStateRejected {
				return &l.Items[i], why
			}
			for _, st := range l.Items[i].Status.AdmissionChecks {
				if string(st.Name) == check && st.State == state {
					wl, msg = &l.Items[i], st.Message
					return wl, msg
				}
			}
		}
	}
	t.Fatalf("the %s check of %s's workload is not %s after 60s: %s", check, owner, state, seen)
	return nil, ""
}

// TestKueueAdmitsOnlyTheWorkloadsTauGridRenderedUnchanged: with the
// platform's check on its ClusterQueues (and no admission policy at the
// door, as if a platform team turned it off), TauGrid's run is admitted as
// before; its next run's Job, edited while it queued, is not; nor is a Job
// created with kubectl and the queue label. Each refusal says why, on the
// workload, and the Jobs never start.
func TestKueueAdmitsOnlyTheWorkloadsTauGridRenderedUnchanged(t *testing.T) {
	integration(t)
	ctx := context.Background()
	stop := startAdmission(t)
	defer stop()
	plat := newPlatformFrom(t, examplePlatformCopy(t, "ad"))
	plat.r.AdmissionCheck = true
	f := newRunFixtureWith(t, "ad", plat)
	check := platformctrl.PolicyCheckName(plat.name)

	cq := &kueue.ClusterQueue{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: f.ns}, cq); err != nil {
		t.Fatal(err)
	}
	if s := cq.Spec.AdmissionChecksStrategy; s == nil || !slices.ContainsFunc(s.AdmissionChecks, func(r kueue.AdmissionCheckStrategyRule) bool { return string(r.Name) == check }) {
		t.Fatalf("ClusterQueue %s does not wait on %s: %+v", f.ns, check, s)
	}
	waitFor(t, 30*time.Second, "AdmissionCheck "+check+" active", func() bool {
		ac := &kueue.AdmissionCheck{}
		return k8s.Get(ctx, client.ObjectKey{Name: check}, ac) == nil && apimeta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive)
	})
	setGPUQuota(t, f.ns, "1", "0") // one run at a time

	// TauGrid's own run: admitted as before, the check saying why.
	f.research.runRef("first", "target: default\n")
	f.poll(t)
	first := f.runOf(t, "refs/tau/runs/first")
	f.reconcileRun(t, first.Name, taugridv1.PhaseAdmitted)
	if _, msg := checkOf(t, f.ns, render.WorkloadName(first.Name, 1), check, kueue.CheckStateReady); !strings.Contains(msg, "was rendered for run "+first.Name) {
		t.Errorf("the Ready check says %q", msg)
	}

	// The next run queues behind it; its Job is edited while suspended
	// (what the API server allows: the pod template's scheduling fields
	// and labels), then the quota frees.
	f.research.runRef("second", "target: default\n")
	f.poll(t)
	second := f.runOf(t, "refs/tau/runs/second")
	f.reconcileRun(t, second.Name, taugridv1.PhaseQueued)
	job := &batchv1.Job{}
	name := render.WorkloadName(second.Name, 1)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, job); err != nil {
		t.Fatal(err)
	}
	edited := job.DeepCopy()
	edited.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "the-attackers-node"}
	if err := k8s.Patch(ctx, edited, client.MergeFrom(job)); err != nil {
		t.Fatalf("editing the suspended Job: %v", err)
	}
	completeJob(t, f.ns, render.WorkloadName(first.Name, 1))
	f.reconcileRun(t, first.Name, taugridv1.PhaseSucceeded)
	_, msg := checkOf(t, f.ns, name, check, kueue.CheckStateRejected)
	if want := "Job " + name + " changed after TauGrid rendered it: spec.template.spec.nodeSelector"; !strings.Contains(msg, want) {
		t.Errorf("the check says %q, want %q", msg, want)
	}

	// A Job created with kubectl and the queue label, by someone with
	// edit rights in the namespace.
	intruder := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "intruder", Namespace: f.ns, Labels: map[string]string{render.LabelQueueName: "runs"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "miner", Image: "busybox"}}}}},
	}
	if err := k8s.Create(ctx, intruder); err != nil {
		t.Fatal(err)
	}
	if _, msg := checkOf(t, f.ns, "intruder", check, kueue.CheckStateRejected); !strings.Contains(msg, "created outside TauGrid: Job intruder belongs to no TauGrid run") {
		t.Errorf("the intruder's check says %q", msg)
	}
	for _, n := range []string{name, "intruder"} {
		j := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: n}, j); err != nil {
			t.Fatal(err)
		}
		if j.Spec.Suspend == nil || !*j.Spec.Suspend || j.Status.StartTime != nil {
			t.Errorf("Job %s was started", n)
		}
	}
	// The run whose Job was edited ends, saying why: it can never run.
	failed := f.reconcileRun(t, second.Name, taugridv1.PhaseFailed)
	if want := "cannot run: TauGrid policy: Job " + name + " changed after TauGrid rendered it"; !strings.Contains(failed.Status.Message, want) {
		t.Errorf("the run says %q, want %q", failed.Status.Message, want)
	}
}
