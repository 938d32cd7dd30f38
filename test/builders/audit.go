package builders

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// RequestedBy sets the tagger or pusher git recorded for the run.
func (b *TauRunBuilder) RequestedBy(who string) *TauRunBuilder {
	b.run.Spec.Trigger.Requester = who
	return b
}

// SignedBy records a verified SSH signature by principal on the run's tag.
func (b *TauRunBuilder) SignedBy(principal, fingerprint string) *TauRunBuilder {
	b.run.Status.Signature = &taugridv1.SignatureStatus{Verified: true, Method: "ssh", Principal: principal,
		Fingerprint: fingerprint, Object: "tag 1111111111111111111111111111111111111111"}
	return b
}

// RenderedFrom records the tau file, its digest and the policy's digest.
func (b *TauRunBuilder) RenderedFrom(file, configDigest, policyDigest string) *TauRunBuilder {
	b.run.Status.TauFile, b.run.Status.ConfigDigest, b.run.Status.PolicyDigest = file, configDigest, policyDigest
	return b
}

// ControlledByJob makes the Workload Kueue's for the Job of that name, as
// Kueue makes it for a run's Job.
func (b *WorkloadBuilder) ControlledByJob(job string) *WorkloadBuilder {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: b.wl.Namespace, UID: types.UID("job-" + job)}}
	b.wl.OwnerReferences = append(b.wl.OwnerReferences, *metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job")))
	return b
}

// AdmittedBy records Kueue's admission by ClusterQueue cq at t.
func (b *WorkloadBuilder) AdmittedBy(cq string, t time.Time) *WorkloadBuilder {
	b.wl.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq)}
	return b.AdmittedAt(t)
}

// AdmissionCheck records an admission check's state, as its controller set
// it at t.
func (b *WorkloadBuilder) AdmissionCheck(name string, state kueue.CheckState, msg string, t time.Time) *WorkloadBuilder {
	b.wl.Status.AdmissionChecks = append(b.wl.Status.AdmissionChecks, kueue.AdmissionCheckState{
		Name: kueue.AdmissionCheckReference(name), State: state, Message: msg, LastTransitionTime: metav1.NewTime(t)})
	return b
}

// JobUIDLabel sets the label Kueue puts on a Workload: its job's UID.
func (b *WorkloadBuilder) JobUIDLabel(uid string) *WorkloadBuilder {
	if b.wl.Labels == nil {
		b.wl.Labels = map[string]string{}
	}
	b.wl.Labels["kueue.x-k8s.io/job-uid"] = uid
	return b
}
