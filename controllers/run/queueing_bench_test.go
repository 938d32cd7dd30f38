package run

import (
	"context"
	"fmt"
	"testing"
	"time"

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

// BenchmarkExplainingAThousandPendingRuns is the cost of one pass of the
// run reconciler over 1,000 queued runs of one ClusterQueue: each orders the
// queue from the cache's list and explains its own wait.
func BenchmarkExplainingAThousandPendingRuns(b *testing.B) {
	const n = 1000
	cq := builders.MakeClusterQueue("team-a").Cohort("research").Quota("h200", "nvidia.com/gpu", "8", "8").
		Reserved("h200", "nvidia.com/gpu", "16", "8").Obj()
	wls := make([]kueue.Workload, n)
	for i := range wls {
		name := fmt.Sprintf("job-r%04d-1-abcde", i)
		wls[i] = *builders.MakeWorkload(name, "team-a").UID(name).Priority(int32(i%3*1000)).
			Created(metav1.NewTime(time.Unix(int64(i), 0))).
			QuotaReserved(metav1.ConditionFalse, "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 8 more needed").Obj()
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range wls {
			pending := make([]*kueue.Workload, n)
			for j := range wls {
				pending[j] = &wls[j]
			}
			pos, total, ahead := positionIn(pending, &wls[i])
			ex := runs.ExplainWait(&wls[i], runs.QueueState{ClusterQueue: cq, Position: pos, Pending: total, Ahead: ahead})
			if ex.Kind != runs.WaitQuota {
				b.Fatal(ex)
			}
		}
	}
}

// jobReader answers Gets of Jobs from a map, as the cache does with
// client.UnsafeDisableDeepCopy: a lookup and a shallow copy.
type jobReader struct {
	client.Client
	jobs map[client.ObjectKey]*batchv1.Job
}

func (r jobReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	j, ok := r.jobs[key]
	if !ok {
		return apierrors.NewNotFound(batchv1.Resource("jobs"), key.Name)
	}
	*obj.(*batchv1.Job) = *j
	return nil
}

// BenchmarkEstimatingAThousandPendingRuns is what the start estimate adds
// to that pass: each of 1,000 queued runs of 8 GPUs (2-hour limits) reads
// the time limit of every run ahead of it from the cache and estimates
// its start behind the 2 runs holding the queue's 16 GPUs.
func BenchmarkEstimatingAThousandPendingRuns(b *testing.B) {
	const n = 1000
	cq := builders.MakeClusterQueue("team-a").Cohort("research").Quota("h200", "nvidia.com/gpu", "16", "0").
		Reserved("h200", "nvidia.com/gpu", "16", "0").Obj()
	gpus := corev1.ResourceList{runs.GPU: resource.MustParse("8")}
	jobs := map[client.ObjectKey]*batchv1.Job{}
	pending := make([]*kueue.Workload, n)
	for i := range pending {
		name := fmt.Sprintf("r%04d-1", i)
		w := builders.MakeWorkload("job-"+name+"-abcde", "team-a").ControlledByJob(name).Obj()
		w.Spec.PodSets = []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}}}}}
		pending[i] = w
		j := builders.MakeJob(name, "team-a").Obj()
		j.Spec.ActiveDeadlineSeconds = ptr.To[int64](7200)
		jobs[client.ObjectKey{Namespace: "team-a", Name: name}] = j
	}
	holding := []runs.Slot{{Run: "a", GPUs: 8, Limit: 2 * time.Hour, Elapsed: time.Hour}, {Run: "b", GPUs: 8, Limit: 2 * time.Hour}}
	r := &RunReconciler{Client: jobReader{jobs: jobs}}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		for i := range pending {
			if at := r.startEstimate(context.Background(), cq, holding, pending[:i+1], now); at.IsZero() {
				b.Fatalf("run %d: no estimate", i)
			}
		}
	}
}
