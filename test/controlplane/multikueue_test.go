package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/taugrid/taugrid/clusters"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// dispatchTimeout bounds a Job's trip from the manager to a worker's pod
// and back, on a loaded machine.
const dispatchTimeout = 90 * time.Second

// A Job queued in the manager is dispatched to the one worker whose quota
// fits it, runs there (the worker's Job controller makes its pod, kwok runs
// it), and its completion is mirrored back to the manager's Job, which the
// manager's own controllers left alone.
func TestAManagersJobRunsOnTheWorkerThatFitsItAndItsStatusComesBack(t *testing.T) {
	needsControlPlane(t)
	f := FleetForTest(t, FleetOptions{Workers: []string{"small", "large"}})
	tn := newTenant()
	ctx := context.Background()
	cq := tn.clusterQueue(8)
	clusters.WithDispatch(cq)
	check, config := clusters.Dispatch(tn.ClusterQueue, []string{"small", "large"})
	create(t, f.Manager.Client, tn.namespace(), tn.resourceFlavor(), cq, tn.localQueue(), check, config,
		clusters.Cluster(clusters.Worker{Name: "small", Secret: KubeconfigSecret("small")}),
		clusters.Cluster(clusters.Worker{Name: "large", Secret: KubeconfigSecret("large")}))
	for name, gpus := range map[string]int64{"small": 1, "large": 8} {
		w := f.Workers[name]
		create(t, w.Client, tn.namespace(), tn.resourceFlavor(), tn.clusterQueue(gpus), tn.localQueue())
		if err := w.AddNodes(ctx, GPUNode(name+"-gpu")); err != nil {
			t.Fatal(err)
		}
	}
	waitCheckActive(t, f.Manager.Client, check.Name)

	job := tn.suspendedJob("wide", 4)
	create(t, f.Manager.Client, job)
	if got := ptr.Deref(job.Spec.ManagedBy, ""); got != kueue.MultiKueueControllerName {
		t.Fatalf("the manager's Job has spec.managedBy %q, want %q", got, kueue.MultiKueueControllerName)
	}
	var cluster string
	eventually(t, dispatchTimeout, func() (bool, string) {
		wl := workloadFor(t, f.Manager.Client, tn.Namespace, job.UID)
		if wl == nil || wl.Status.ClusterName == nil {
			return false, "the manager's Workload names no cluster"
		}
		cluster = *wl.Status.ClusterName
		return true, ""
	})
	if cluster != "large" {
		t.Fatalf("a Job asking 4 GPUs went to %q, want the worker with 8 (large)", cluster)
	}
	pod := runningPodOf(t, f.Workers["large"].Client, job)
	succeed(t, f.Workers["large"].Client, pod)
	eventually(t, dispatchTimeout, func() (bool, string) {
		var got batchv1.Job
		if err := f.Manager.Client.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			return false, err.Error()
		}
		return got.Status.Succeeded == 1, fmt.Sprintf("the manager's Job status: %+v", got.Status)
	})
	var pods corev1.PodList
	if err := f.Manager.Client.List(ctx, &pods, client.InNamespace(tn.Namespace)); err != nil || len(pods.Items) != 0 {
		t.Errorf("the manager has %d pods (%v), want none: the worker runs them", len(pods.Items), err)
	}
}

// waitCheckActive waits for the manager's Kueue to reach every worker of a
// MultiKueue check.
func waitCheckActive(t testing.TB, c client.Client, name string) {
	t.Helper()
	eventually(t, dispatchTimeout, func() (bool, string) {
		var ac kueue.AdmissionCheck
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &ac); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive),
			fmt.Sprintf("AdmissionCheck %s: %+v", name, ac.Status.Conditions)
	})
}

// runningPodOf waits for the pod of the worker's copy of job to run.
func runningPodOf(t testing.TB, c client.Client, job *batchv1.Job) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, dispatchTimeout, func() (bool, string) {
		var pods corev1.PodList
		if err := c.List(context.Background(), &pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name}); err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if pods.Items[i].Status.Phase == corev1.PodRunning {
				pod = &pods.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods of %s, none running", len(pods.Items), job.Name)
	})
	return pod
}

// succeed ends a running pod's containers with code 0, as its kubelet would.
func succeed(t testing.TB, c client.Client, p *corev1.Pod) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodSucceeded
		for i := range cur.Status.ContainerStatuses {
			cs := &cur.Status.ContainerStatuses[i]
			cs.Ready, cs.Started = false, ptr.To(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.Now()}}
		}
		return c.Status().Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
}
