package admission

import (
	"context"
	"maps"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/render"
)

// fleetWorld is a run whose Job the manager dispatched to worker large:
// the manager's Job as its API server stored it (Kueue's webhook set
// managedBy, the Job controller its UID labels), and the copy MultiKueue
// made of it on the worker, as Kueue's Job adapter and the worker's API
// server make it, with the worker's workload for it.
type fleetWorld struct {
	*world
	copy   *batchv1.Job
	remote *kueue.Workload
}

const controllerUID = "batch.kubernetes.io/controller-uid"

func newFleetWorld(t *testing.T) *fleetWorld {
	t.Helper()
	w := newWorld(t)
	job := w.job
	job.Spec.ManagedBy = ptr.To(kueue.MultiKueueControllerName)
	job.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{controllerUID: string(job.UID)}}
	if job.Spec.Template.Labels == nil {
		job.Spec.Template.Labels = map[string]string{}
	}
	job.Spec.Template.Labels[controllerUID] = string(job.UID)
	job.Spec.Template.Labels["controller-uid"] = string(job.UID)
	job.Spec.Template.Labels["batch.kubernetes.io/job-name"] = job.Name
	fp, err := render.FingerprintOf(job)
	if err != nil {
		t.Fatal(err)
	}
	w.run.Status.Workload.Digest, w.run.Status.Workload.FieldDigests = fp.Digest, fp.Short()

	copied := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, UID: "copy-uid",
		Labels: maps.Clone(job.Labels), Annotations: maps.Clone(job.Annotations)}, Spec: *job.Spec.DeepCopy()}
	copied.Spec.ManagedBy = nil
	copied.Spec.Template.Labels = maps.Clone(job.Spec.Template.Labels)
	copied.Labels[prebuiltWorkloadLabel] = w.wl.Name
	copied.Labels[kueue.MultiKueueOriginLabel] = "manager"
	copied.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{controllerUID: "copy-uid"}}
	copied.Spec.Template.Labels[controllerUID] = "copy-uid"
	copied.Spec.Template.Labels["controller-uid"] = "copy-uid"

	w.wl.Spec.PodSets = []kueue.PodSet{{Name: "main", Count: 1, Template: *job.Spec.Template.DeepCopy()}}
	remote := w.wl.DeepCopy()
	remote.Labels = map[string]string{kueue.MultiKueueOriginLabel: "manager"}
	remote.OwnerReferences[0].UID = copied.UID
	remote.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "taugrid-policy-default", State: kueue.CheckStatePending}}
	remote.Spec.PreemptionGates = []kueue.PreemptionGate{{Name: "kueue.x-k8s.io/multikueue"}}
	return &fleetWorld{world: w, copy: copied, remote: remote}
}

// decide reconciles the worker's workload as the manager's Workers do.
func (w *fleetWorld) decide(t *testing.T) kueue.AdmissionCheckState {
	t.Helper()
	onManager := []client.Object{w.run, w.wl}
	if w.job != nil {
		onManager = append(onManager, w.job)
	}
	onWorker := []client.Object{w.remote, w.check}
	if w.copy != nil {
		onWorker = append(onWorker, w.copy)
	}
	manager, worker := sharedtest.NewClient(onManager...), sharedtest.NewClient(onWorker...)
	chk := &Check{Client: worker, APIReader: worker, Clock: sharedtest.Clock(), Worker: "large", Manager: manager, ManagerAPIReader: manager}
	key := types.NamespacedName{Namespace: ns, Name: w.remote.Name}
	if _, err := chk.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := &kueue.Workload{}
	if err := worker.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	return got.Status.AdmissionChecks[0]
}

// TestAWorkerAdmitsOnlyTheCopyOfWhatTheManagerDispatched: each case is
// what someone with rights on a worker cluster (or on the manager's Job
// after dispatch) tries, and the worker's check's answer; MultiKueue's
// own copy, untouched, is Ready.
func TestAWorkerAdmitsOnlyTheCopyOfWhatTheManagerDispatched(t *testing.T) {
	cases := map[string]struct {
		change func(*fleetWorld)
		state  kueue.CheckState
		says   string
	}{
		"the manager's workload, before MultiKueue makes the Job": {
			change: func(w *fleetWorld) { w.copy, w.remote.OwnerReferences = nil, nil }, state: kueue.CheckStateReady,
			says: "dispatched by the manager cluster, where Job r1-1 was rendered for run r1 under policy commit cccccccccccc and is unchanged since",
		},
		"MultiKueue's copy of the Job, unchanged": {
			change: func(*fleetWorld) {}, state: kueue.CheckStateReady,
			says: "Job r1-1 is the manager's copy of what was rendered for run r1 under policy commit cccccccccccc",
		},
		"MultiKueue's copy, the manager's Job admitted there since (Kueue wrote its node selector)": {
			change: func(w *fleetWorld) { w.job.Spec.Template.Spec.NodeSelector = map[string]string{"flavor": "h200"} }, state: kueue.CheckStateReady,
			says: "is the manager's copy",
		},
		"a workload made on the worker, by hand or for a Job made there": {
			change: func(w *fleetWorld) { w.remote.Name = "job-miner-abcde" }, state: kueue.CheckStateRejected,
			says: "created outside TauGrid: the manager cluster dispatched no workload job-miner-abcde to worker large",
		},
		"the dispatched workload's pods edited on the worker": {
			change: func(w *fleetWorld) { w.remote.Spec.PodSets[0].Count = 64 }, state: kueue.CheckStateRejected,
			says: "workload job-r1-1-abcde on worker large differs from the one the manager dispatched: podSets[main]",
		},
		"the dispatched workload's priority raised on the worker": {
			change: func(w *fleetWorld) { w.remote.Spec.Priority = ptr.To[int32](1 << 20) }, state: kueue.CheckStateRejected,
			says: "differs from the one the manager dispatched: its queue, priority or other fields",
		},
		"a Job made on the worker, ahead of MultiKueue, adopting the dispatched workload": {
			change: func(w *fleetWorld) { delete(w.copy.Labels, kueue.MultiKueueOriginLabel) }, state: kueue.CheckStateRejected,
			says: "created outside TauGrid: Job r1-1 was made on worker large, not dispatched from the manager cluster",
		},
		"the same with a forged origin label and another name": {
			change: func(w *fleetWorld) { w.copy.Name, w.remote.OwnerReferences[0].Name = "miner", "miner" }, state: kueue.CheckStateRejected,
			says: "created outside TauGrid: the manager cluster dispatched no Job miner",
		},
		"the copy's image edited on the worker": {
			change: func(w *fleetWorld) { w.copy.Spec.Template.Spec.Containers[0].Image = "evil/miner" }, state: kueue.CheckStateRejected,
			says: "Job r1-1 on this worker differs from what TauGrid rendered: spec.template.spec.containers[main].image",
		},
		"the copy's pods labelled into another run's fence": {
			change: func(w *fleetWorld) { w.copy.Spec.Template.Labels[render.LabelRun] = "someone-else" }, state: kueue.CheckStateRejected,
			says: "spec.template.metadata.labels",
		},
		"a privileged container added to the copy": {
			change: func(w *fleetWorld) {
				w.copy.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			}, state: kueue.CheckStateRejected,
			says: "spec.template.spec.containers[main].securityContext",
		},
		"the manager's Job edited before dispatch": {
			change: func(w *fleetWorld) {
				w.copy, w.remote.OwnerReferences = nil, nil
				w.job.Spec.Template.Spec.Containers[0].Image = "evil/miner"
			}, state: kueue.CheckStateRejected,
			says: "Job r1-1 changed after TauGrid rendered it: spec.template.spec.containers[main].image",
		},
		"the run was cancelled since": {
			change: func(w *fleetWorld) { w.copy, w.remote.OwnerReferences = nil, nil; w.run.Spec.Cancel = true }, state: kueue.CheckStateRejected,
			says: "run r1 was cancelled",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newFleetWorld(t)
			tc.change(w)
			st := w.decide(t)
			if st.State != tc.state || !strings.Contains(st.Message, tc.says) || !strings.HasPrefix(st.Message, "TauGrid policy: ") {
				t.Errorf("check %s: %q; want %s saying %q", st.State, st.Message, tc.state, tc.says)
			}
		})
	}
}
