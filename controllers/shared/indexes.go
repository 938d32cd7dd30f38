package shared

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Index is a field index the manager's cache holds, so that a List with
// client.MatchingFields{Field: v} is answered from the cache.
type Index struct {
	Object  client.Object
	Field   string
	Extract client.IndexerFunc
}

// Indexes are the field indexes the controllers and the servers beside
// them list by. cmd/tau-controller registers them on the manager and the
// table tests' fake client (sharedtest.NewClient) has the same, so a List
// that works in a test works in the cluster.
func Indexes() []Index {
	return []Index{
		{&taugridv1.TauRepository{}, server.IndexRepositoryURL, server.RepositoryURL},
		{&taugridv1.TauRepository{}, server.IndexWebhookPath, server.WebhookPathOf},
		{&taugridv1.TauPlatform{}, server.IndexPlatformWebhookPath, server.PlatformWebhookPathOf},
		{&kueue.Workload{}, IndexWorkloadOwner, WorkloadOwner},
		{&kueue.Workload{}, IndexWorkloadQueue, WorkloadQueue},
		{&corev1.Pod{}, IndexPodRun, PodRun},
	}
}

// IndexPodRun indexes pods by the run they are of (render.LabelRun): a
// run's pods are found among its own, not by matching the labels of
// every pod of the namespace (hack/scale, 10,000 runs: 15% of the
// controller's CPU, 500 pods a tenant matched at each look at a run).
const IndexPodRun = "taugrid.dev/pod-run"

// PodRun extracts IndexPodRun.
func PodRun(o client.Object) []string {
	if run := o.GetLabels()[render.LabelRun]; run != "" {
		return []string{run}
	}
	return nil
}

// IndexWorkloadQueue indexes the Workloads Kueue has not finished by
// their LocalQueue: a queued run reads its queue's waiting and admitted
// Workloads, not every Workload its namespace has kept (hack/scale,
// 10,000 runs: 11% of the controller's CPU).
const IndexWorkloadQueue = "taugrid.dev/workload-queue"

// WorkloadQueue extracts IndexWorkloadQueue.
func WorkloadQueue(o client.Object) []string {
	w, ok := o.(*kueue.Workload)
	if !ok || meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished) {
		return nil
	}
	return []string{string(w.Spec.QueueName)}
}

// IndexWorkloadOwner indexes Kueue Workloads by "Kind/name" of the object
// that controls them (a Job, a RayJob).
const IndexWorkloadOwner = "taugrid.dev/workload-owner"

// WorkloadOwner extracts IndexWorkloadOwner.
func WorkloadOwner(o client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{ref.Kind + "/" + ref.Name}
	}
	return nil
}
