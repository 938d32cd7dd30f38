package builders

import (
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// managedByTauGrid adds the label render puts on everything TauGrid makes.
func managedByTauGrid(labels map[string]string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	labels[render.LabelManagedBy] = render.ManagedBy
	return labels
}

// ManagedByTauGrid labels the Job as TauGrid's, as render does.
func (b *JobBuilder) ManagedByTauGrid() *JobBuilder {
	b.job.Labels = managedByTauGrid(b.job.Labels)
	return b
}

// FollowedBy makes run the Job's controller, as the run reconciler does.
func (b *JobBuilder) FollowedBy(run *taugridv1.TauRun) *JobBuilder {
	b.job.OwnerReferences = append(b.job.OwnerReferences, *metav1.NewControllerRef(run, taugridv1.GroupVersion.WithKind("TauRun")))
	return b
}

// EvidenceHeld makes the Job a worker's copy of attempt of run, labelled as
// render labels it and held for its evidence (FinalizerEvidence).
func (b *JobBuilder) EvidenceHeld(run string, attempt int) *JobBuilder {
	b.job.Labels = managedByTauGrid(b.job.Labels)
	b.job.Labels[render.LabelRun], b.job.Labels[render.LabelAttempt] = run, strconv.Itoa(attempt)
	b.job.Finalizers = append(b.job.Finalizers, taugridv1.FinalizerEvidence)
	return b
}

// ManagedByTauGrid labels the RayJob as TauGrid's, as render does.
func (b *RayJobBuilder) ManagedByTauGrid() *RayJobBuilder {
	b.rj.Labels = managedByTauGrid(b.rj.Labels)
	return b
}

// RayJobUID sets the RayJob's UID, which its Workload's owner names.
func (b *RayJobBuilder) RayJobUID(uid string) *RayJobBuilder {
	b.rj.UID = types.UID(uid)
	return b
}

// OwnedByRayJob makes the Workload Kueue's for rj: controlled by it.
func (b *WorkloadBuilder) OwnedByRayJob(rj *rayv1.RayJob) *WorkloadBuilder {
	b.wl.OwnerReferences = append(b.wl.OwnerReferences, *metav1.NewControllerRef(rj, rayv1.GroupVersion.WithKind("RayJob")))
	return b
}

// ManagedByTauGrid labels the Workload as TauGrid's, as a Kueue that
// copies its job's labels does.
func (b *WorkloadBuilder) ManagedByTauGrid() *WorkloadBuilder {
	b.wl.Labels = managedByTauGrid(b.wl.Labels)
	return b
}

// ReservedAt records quota reserved at t, and no admission yet (an
// admission check pending).
func (b *WorkloadBuilder) ReservedAt(t time.Time) *WorkloadBuilder {
	return b.WorkloadCondition(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue team-a", t)
}

// AdmittedAt records quota reserved and the Workload admitted at t.
func (b *WorkloadBuilder) AdmittedAt(t time.Time) *WorkloadBuilder {
	return b.ReservedAt(t).WorkloadCondition(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "The workload is admitted", t)
}

// OnWorker records the worker cluster MultiKueue dispatched the Workload to.
func (b *WorkloadBuilder) OnWorker(cluster string) *WorkloadBuilder {
	b.wl.Status.ClusterName = &cluster
	return b
}

// WorkloadDeleting marks the Workload as being deleted, held by finalizer.
func (b *WorkloadBuilder) WorkloadDeleting(finalizer string) *WorkloadBuilder {
	now := metav1.Now()
	b.wl.DeletionTimestamp = &now
	b.wl.Finalizers = append(b.wl.Finalizers, finalizer)
	return b
}

// ManagedByTauGrid labels the pod as TauGrid's, as render labels its
// pod templates.
func (b *AttemptPodBuilder) ManagedByTauGrid() *AttemptPodBuilder {
	b.pod.Labels = managedByTauGrid(b.pod.Labels)
	return b
}

// TerminatingSince marks the pod as being deleted since t, held (as a
// pod no kubelet confirms is) by a finalizer.
func (b *AttemptPodBuilder) TerminatingSince(t time.Time) *AttemptPodBuilder {
	b.pod.DeletionTimestamp = &metav1.Time{Time: t}
	b.pod.Finalizers = append(b.pod.Finalizers, "example.com/kubelet-gone")
	return b
}

// ControlledBy makes kind name (a Job, or a RayCluster) the pod's
// controller.
func (b *AttemptPodBuilder) ControlledBy(kind, name string) *AttemptPodBuilder {
	apiVersion := "batch/v1"
	if kind == "RayCluster" {
		apiVersion = rayv1.GroupVersion.String()
	}
	controller := true
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: &controller})
	return b
}

// NotReady has the node's kubelet stop reporting: Ready Unknown.
func (b *GPUNodeBuilder) NotReady() *GPUNodeBuilder {
	for i := range b.node.Status.Conditions {
		if b.node.Status.Conditions[i].Type == corev1.NodeReady {
			b.node.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
	}
	return b
}
