package runs

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// pendingCopy is a worker's copy of a dispatched Workload that its
// ClusterQueue cannot hold, in Kueue v0.17's words.
func pendingCopy(msg string) *kueue.Workload {
	return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "job-r-1-x"}, Spec: kueue.WorkloadSpec{QueueName: "runs"},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: msg}}}}
}

// A run waiting on MultiKueue's check is explained in each worker's own
// words; a worker that cannot be read says so without the request, one
// without a copy says that; any other wait is left as it is.
func TestADispatchedWaitIsToldInTheWorkersWords(t *testing.T) {
	checks := Explanation{Kind: WaitAdmissionChecks, Short: "quota reserved in a; waiting for admission checks: tau-dispatch-a", Long: "quota reserved."}
	tooBig := "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h200, previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)"
	got := ExplainDispatched(checks, []WorkerWait{
		{Cluster: "east", Workload: pendingCopy(tooBig)},
		{Cluster: "north"},
		{Cluster: "west", Err: errors.New(`Get "https://10.0.0.9:6443/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/job-r-1-x": dial tcp 10.0.0.9:6443: connect: connection refused`)},
	})
	if got.Kind != WaitDispatched {
		t.Errorf("kind %s, want %s", got.Kind, WaitDispatched)
	}
	for _, want := range []string{"dispatched, not yet admitted by a worker; east: cannot run: asks 16 nvidia.com/gpu, queue runs can hold at most 8", "north: has no copy yet", "west: cannot reach it"} {
		if !strings.Contains(got.Short, want) && !strings.Contains(got.Long, want) {
			t.Errorf("the explanation lacks %q: %+v", want, got)
		}
	}
	for _, want := range []string{"Worker east: cannot run", "Kueue: " + tooBig, "Worker west: cannot read its copy of the workload: dial tcp 10.0.0.9:6443: connect: connection refused.", "quota reserved."} {
		if !strings.Contains(got.Long, want) {
			t.Errorf("the long explanation lacks %q:\n%s", want, got.Long)
		}
	}
	if strings.Contains(got.Long, "https://") || len([]rune(got.Short)) > maxShortExplanation {
		t.Errorf("the explanation quotes the request or runs long: %+v", got)
	}
	quota := Explanation{Kind: WaitQuota, Short: "queued"}
	if again := ExplainDispatched(quota, []WorkerWait{{Cluster: "east"}}); again != quota {
		t.Errorf("a quota wait became %+v", again)
	}
	if again := ExplainDispatched(checks, nil); again != checks {
		t.Errorf("a wait with no worker to ask became %+v", again)
	}
}

// gets is a worker's reader that counts its Gets.
type gets struct {
	client.Reader
	n int
}

func (g *gets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	g.n++
	return g.Reader.Get(ctx, key, obj, opts...)
}

// The copies of a dispatched workload are read in the workers it was
// nominated to, in name order, with one Get each and nothing else: a
// worker with no copy has none, one that cannot be reached says why, and
// a workload nominated nowhere reads no worker.
func TestTheWorkersCopiesAreReadOnceEach(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	wl := pendingCopy("")
	wl.Status.NominatedClusterNames = []string{"west", "north", "east"}
	readers := map[string]*gets{
		"east":  {Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(pendingCopy("no room")).Build()},
		"north": {Reader: fake.NewClientBuilder().WithScheme(scheme).Build()},
	}
	var asked []string
	worker := func(_ context.Context, cluster string) (client.Reader, error) {
		asked = append(asked, cluster)
		if r := readers[cluster]; r != nil {
			return r, nil
		}
		return nil, errors.New("worker cluster west: its kubeconfig Secret west-kubeconfig: not found")
	}
	waits := ReadWorkerWaits(context.Background(), wl, worker)
	if got := strings.Join(asked, ","); got != "east,north,west" {
		t.Errorf("the workers were asked in the order %s, want east,north,west", got)
	}
	for name, r := range readers {
		if r.n != 1 {
			t.Errorf("worker %s was read %d times, want once", name, r.n)
		}
	}
	if len(waits) != 3 || waits[0].Workload == nil || waits[0].Err != nil || waits[1].Workload != nil || waits[1].Err != nil || waits[2].Err == nil {
		t.Errorf("the waits are %+v; want east's copy, none in north, west's error", waits)
	}
	asked = nil
	if waits := ReadWorkerWaits(context.Background(), pendingCopy(""), worker); len(waits) != 0 || len(asked) != 0 {
		t.Errorf("a workload nominated nowhere read %v: %+v", asked, waits)
	}
}
