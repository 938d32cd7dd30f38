package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

const admissionTimeout = 30 * time.Second

// setUpTenant creates a tenant's namespace and queues with the given GPU quota.
func setUpTenant(t testing.TB, c client.Client, gpus int64) tenant {
	t.Helper()
	tn := newTenant()
	create(t, c, tn.namespace(), tn.resourceFlavor(), tn.clusterQueue(gpus), tn.localQueue())
	return tn
}

// jobState is what a test checks about a Job and the Workload Kueue made for it.
type jobState struct {
	Suspended     bool
	QuotaReserved metav1.ConditionStatus
}

func TestKueueAdmitsTheFirstGPUJobAndHoldsTheSecondForLackOfGPUs(t *testing.T) {
	env := sharedEnv(t)
	tn := setUpTenant(t, env.Client, 1)

	first := tn.suspendedJob("first", 1)
	create(t, env.Client, first)
	waitForJobState(t, env.Client, first, jobState{Suspended: false, QuotaReserved: metav1.ConditionTrue})

	second := tn.suspendedJob("second", 1)
	create(t, env.Client, second)
	wl := waitForJobState(t, env.Client, second, jobState{Suspended: true, QuotaReserved: metav1.ConditionFalse})

	msg := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved).Message
	if !strings.Contains(msg, string(gpu)) {
		t.Errorf("QuotaReserved message of the second job's Workload = %q, want it to name %s", msg, gpu)
	}
	// Still pending a while later: Kueue did not merely lag behind.
	time.Sleep(time.Second)
	if got := stateOf(t, env.Client, second); got.Suspended != true {
		t.Errorf("second job was unsuspended without quota")
	}
}

// Reading a ClusterQueue at v1beta1 makes the API server convert it from the
// stored v1beta2 through Kueue's conversion webhook, over TLS checked against the
// CA the harness made: the certificate set-up is real, not just tolerated.
func TestKueueConvertsItsObjectsToOtherVersionsThroughItsWebhook(t *testing.T) {
	env := sharedEnv(t)
	tn := setUpTenant(t, env.Client, 3)

	cq := &unstructured.Unstructured{}
	cq.SetAPIVersion("kueue.x-k8s.io/v1beta1")
	cq.SetKind("ClusterQueue")
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: tn.ClusterQueue}, cq); err != nil {
		t.Fatalf("getting the ClusterQueue at v1beta1: %v", err)
	}
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	if diff := cmp.Diff("kueue.x-k8s.io/v1beta1", cq.GetAPIVersion()); diff != "" || len(groups) != 1 {
		t.Errorf("converted ClusterQueue: apiVersion (-want +got) %s, %d resource groups, want 1", diff, len(groups))
	}
}

// waitForJobState waits until the Job and its Workload look like want, and returns
// the Workload.
func waitForJobState(t testing.TB, c client.Client, job *batchv1.Job, want jobState) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	eventually(t, admissionTimeout, func() (bool, string) {
		got := stateOf(t, c, job)
		wl = workloadFor(t, c, job.Namespace, job.UID)
		if diff := cmp.Diff(want, got); diff != "" {
			return false, fmt.Sprintf("job %s (-want +got):\n%s", job.Name, diff)
		}
		return true, ""
	})
	return wl
}

func stateOf(t testing.TB, c client.Client, job *batchv1.Job) jobState {
	t.Helper()
	var got batchv1.Job
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatalf("getting job %s: %v", job.Name, err)
	}
	job.UID = got.UID
	st := jobState{Suspended: got.Spec.Suspend != nil && *got.Spec.Suspend}
	if wl := workloadFor(t, c, job.Namespace, got.UID); wl != nil {
		if cond := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); cond != nil {
			st.QuotaReserved = cond.Status
		}
	}
	return st
}

// workloadFor returns the Workload Kueue created for the object with the given
// UID, or nil if there is none yet.
func workloadFor(t testing.TB, c client.Client, namespace string, owner types.UID) *kueue.Workload {
	t.Helper()
	var list kueue.WorkloadList
	if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatalf("listing workloads: %v", err)
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].OwnerReferences {
			if ref.UID == owner {
				return &list.Items[i]
			}
		}
	}
	return nil
}
