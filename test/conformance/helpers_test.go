package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func getJob(t *testing.T, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	got := &batchv1.Job{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func waitJob(t *testing.T, j *batchv1.Job, ok func(*batchv1.Job) bool) {
	t.Helper()
	waitFor(t, "Job "+j.Name, func() (bool, error) {
		got := &batchv1.Job{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), got); err != nil {
			return false, err
		}
		return ok(got), nil
	})
}

// waitWorkload waits until the Workload Kueue created for owner satisfies ok,
// and returns it.
func waitWorkload(t *testing.T, owner client.Object, ok func(*kueue.Workload) bool) *kueue.Workload {
	t.Helper()
	var found *kueue.Workload
	waitFor(t, fmt.Sprintf("the Workload of %s", owner.GetName()), func() (bool, error) {
		var list kueue.WorkloadList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(owner.GetNamespace())); err != nil {
			return false, err
		}
		for i, wl := range list.Items {
			for _, ref := range wl.OwnerReferences {
				if ref.Name == owner.GetName() && ok(&list.Items[i]) {
					found = &list.Items[i]
					return true, nil
				}
			}
		}
		return false, nil
	})
	return found
}

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (component logs: %s)", what, err, env.LogDir)
	}
}
