package admission

import (
	"context"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
)

const ns = "team-a"

// world is a run, the Job TauGrid created for it (as the API server
// stored it: with a UID, at generation 1) and that Job's workload waiting
// on the check. The check reads the Job from the controller's cache (a
// copy without pod templates, as shared.CacheTransform keeps it) and, when
// that shows nothing, whole from the API server.
type world struct {
	run   *taugridv1.TauRun
	job   *batchv1.Job
	wl    *kueue.Workload
	check *kueue.AdmissionCheck
	other []client.Object
	// created is the Job as created: a change to its spec since moves the
	// generation, as the API server does.
	created *batchv1.Job
	// cached is what the cache holds under the Job's name: nil, the Job
	// as it is now; notCached, nothing.
	cached    *batchv1.Job
	notCached bool
	// wholeReads counts the Job's reads from the API server.
	wholeReads int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	run := builders.MakeTauRun("r1", ns).UID("run-uid").Obj()
	job := builders.MakeJob("r1-1", ns).Obj()
	job.UID = "job-uid"
	job.Labels[render.LabelPriorityClass] = "tau-normal"
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: taugridv1.GroupVersion.String(), Kind: "TauRun", Name: run.Name, UID: run.UID, Controller: ptr.To(true)}}
	fp, err := render.FingerprintOf(job)
	if err != nil {
		t.Fatal(err)
	}
	run.Status.Phase = taugridv1.PhaseQueued
	run.Status.PolicyCommit = strings.Repeat("c", 40)
	job.Generation = 1
	run.Status.Workload = &taugridv1.WorkloadStatus{Kind: "Job", Name: job.Name, UID: job.UID, Digest: fp.Digest, FieldDigests: fp.Short(),
		Generation: job.Generation, LabelsDigest: fp.Labels}
	wl := builders.MakeWorkload("job-r1-1-abcde", ns).QuotaReserved(metav1.ConditionTrue, "").Obj()
	wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{
		{Name: "multikueue-x", State: kueue.CheckStatePending},
		{Name: "taugrid-policy-default", State: kueue.CheckStatePending},
	}
	check := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "taugrid-policy-default"}, Spec: kueue.AdmissionCheckSpec{ControllerName: ControllerName}}
	mk := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "multikueue-x"}, Spec: kueue.AdmissionCheckSpec{ControllerName: kueue.MultiKueueControllerName}}
	return &world{run: run, job: job, wl: wl, check: check, other: []client.Object{mk}, created: job.DeepCopy()}
}

// rerecord makes the Job as it is now the one created and recorded.
func (w *world) rerecord(t *testing.T) {
	t.Helper()
	fp, err := render.FingerprintOf(w.job)
	if err != nil {
		t.Fatal(err)
	}
	w.run.Status.Workload.Digest, w.run.Status.Workload.FieldDigests, w.run.Status.Workload.LabelsDigest = fp.Digest, fp.Short(), fp.Labels
	w.created = w.job.DeepCopy()
}

// countingReader counts the Gets it passes on.
type countingReader struct {
	client.Reader
	n *int
}

func (r countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	*r.n++
	return r.Reader.Get(ctx, key, obj, opts...)
}

// decide reconciles the workload and returns its check states by name.
func (w *world) decide(t *testing.T) map[kueue.AdmissionCheckReference]kueue.AdmissionCheckState {
	t.Helper()
	objs := append([]client.Object{w.run, w.check}, w.other...)
	if w.wl != nil {
		objs = append(objs, w.wl)
	}
	var stored []client.Object
	if w.job != nil {
		if !equality.Semantic.DeepEqual(w.job.Spec, w.created.Spec) {
			w.job.Generation = w.created.Generation + 1
		}
		stored = append(stored, w.job)
		cached := w.cached
		if cached == nil {
			cached = w.job.DeepCopy()
		}
		if !w.notCached {
			shared.SlimPodSpecs(cached)
			objs = append(objs, cached)
		}
	}
	c := sharedtest.NewClient(objs...)
	chk := &Check{Client: c, APIReader: countingReader{sharedtest.NewClient(stored...), &w.wholeReads}, Clock: sharedtest.Clock()}
	key := types.NamespacedName{Namespace: ns, Name: w.wl.Name}
	if _, err := chk.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := &kueue.Workload{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	out := map[kueue.AdmissionCheckReference]kueue.AdmissionCheckState{}
	for _, st := range got.Status.AdmissionChecks {
		out[st.Name] = st
	}
	return out
}

// TestOnlyTheWorkloadTauGridRenderedPassesUnchanged: each case is what an
// attacker with rights to create or edit Jobs in a tenant namespace tries,
// and the check's answer; TauGrid's own Job, untouched, is Ready. whole is
// how often the check read the Job whole from the API server: never while
// the cache shows it unchanged (its generation and labels as recorded),
// once to name what changed.
func TestOnlyTheWorkloadTauGridRenderedPassesUnchanged(t *testing.T) {
	cases := map[string]struct {
		change func(*world)
		state  kueue.CheckState
		says   string
		whole  int
	}{
		"TauGrid's own Job, unchanged": {
			change: func(*world) {}, state: kueue.CheckStateReady,
			says: "Job r1-1 was rendered for run r1 under policy commit cccccccccccc and is unchanged since",
		},
		"TauGrid's own Job, not yet in the cache": {
			change: func(w *world) { w.notCached = true }, state: kueue.CheckStateReady, whole: 1,
			says: "Job r1-1 was rendered for run r1 under policy commit cccccccccccc and is unchanged since",
		},
		"TauGrid's own Job, an earlier one of its name still in the cache": {
			change: func(w *world) { w.cached = w.job.DeepCopy(); w.cached.UID = "earlier-job" }, state: kueue.CheckStateReady, whole: 1,
			says: "Job r1-1 was rendered for run r1 under policy commit cccccccccccc and is unchanged since",
		},
		"TauGrid's own Job, recorded by an earlier controller (no generation)": {
			change: func(w *world) { w.run.Status.Workload.Generation, w.run.Status.Workload.LabelsDigest = 0, "" }, state: kueue.CheckStateReady, whole: 1,
			says: "Job r1-1 was rendered for run r1 under policy commit cccccccccccc and is unchanged since",
		},
		"a container's security context removed after render": {
			change: func(w *world) {
				w.job.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
				w.rerecord(t)
				w.job.Spec.Template.Spec.Containers[0].SecurityContext = nil
			}, state: kueue.CheckStateRejected, whole: 1,
			says: "Job r1-1 changed after TauGrid rendered it: spec.template.spec.containers[main].securityContext (removed)",
		},
		"the image edited, the run recorded by an earlier controller (no field digests)": {
			change: func(w *world) {
				w.run.Status.Workload.Generation, w.run.Status.Workload.LabelsDigest, w.run.Status.Workload.FieldDigests = 0, "", ""
				w.job.Spec.Template.Spec.Containers[0].Image = "evil/miner"
			}, state: kueue.CheckStateRejected, whole: 1,
			says: "Job r1-1 changed after TauGrid rendered it: a field the run recorded no digest of to name",
		},
		"a label added after render": {
			change: func(w *world) { w.job.Labels["kueue.x-k8s.io/queue-name"] = "other-team" }, state: kueue.CheckStateRejected, whole: 1,
			says: "Job r1-1 changed after TauGrid rendered it: metadata.labels[kueue.x-k8s.io/queue-name]",
		},
		"a Workload made by hand": {
			change: func(w *world) { w.wl.OwnerReferences = nil }, state: kueue.CheckStateRejected,
			says: "created outside TauGrid: the workload belongs to no Job or RayJob",
		},
		"a Job created with kubectl and a queue label": {
			change: func(w *world) { w.job.OwnerReferences = nil }, state: kueue.CheckStateRejected,
			says: "created outside TauGrid: Job r1-1 belongs to no TauGrid run",
		},
		"a Job that names the run as its owner but another run's UID": {
			change: func(w *world) { w.job.OwnerReferences[0].UID = "old-run" }, state: kueue.CheckStateRejected,
			says: "names an earlier run r1, not the one there now",
		},
		"a second Job owned by the run under another name": {
			change: func(w *world) { w.run.Status.Workload.Name = "r1-2" }, state: kueue.CheckStateRejected,
			says: "created outside TauGrid: run r1 submitted Job r1-2, not Job r1-1",
		},
		"a Job made again under the recorded name": {
			change: func(w *world) { w.run.Status.Workload.UID = "earlier-job" }, state: kueue.CheckStateRejected,
			says: "Job r1-1 is not the one run r1 submitted under that name",
		},
		"the run has not recorded its Job yet": {
			change: func(w *world) { w.run.Status.Workload = nil }, state: kueue.CheckStatePending,
			says: "waiting for run r1 to record Job r1-1",
		},
		"the image edited after render": {
			change: func(w *world) { w.job.Spec.Template.Spec.Containers[0].Image = "evil/miner" }, state: kueue.CheckStateRejected, whole: 1,
			says: "Job r1-1 changed after TauGrid rendered it: spec.template.spec.containers[main].image",
		},
		"a privileged container added after render": {
			change: func(w *world) {
				w.job.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			}, state: kueue.CheckStateRejected, whole: 1,
			says: "spec.template.spec.containers[main].securityContext",
		},
		"the priority raised after render": {
			change: func(w *world) { w.job.Labels[render.LabelPriorityClass] = "tau-high" }, state: kueue.CheckStateRejected, whole: 1,
			says: "metadata.labels[" + render.LabelPriorityClass + "]",
		},
		"more pods after render": {
			change: func(w *world) { w.job.Spec.Parallelism = ptr.To[int32](64) }, state: kueue.CheckStateRejected, whole: 1,
			says: "spec.parallelism",
		},
		"the run was cancelled": {
			change: func(w *world) { w.run.Spec.Cancel = true }, state: kueue.CheckStateRejected,
			says: "run r1 was cancelled",
		},
		// The cache keeps no field digests of an ended run: its workload
		// is refused for the run's end alone, before anything is compared.
		"the run has ended, its image edited after": {
			change: func(w *world) {
				w.run.Status.Phase, w.run.Status.Workload.FieldDigests = taugridv1.PhaseSucceeded, ""
				w.job.Spec.Template.Spec.Containers[0].Image = "evil/miner"
			}, state: kueue.CheckStateRejected,
			says: "run r1 has ended (Succeeded)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			tc.change(w)
			got := w.decide(t)
			st := got["taugrid-policy-default"]
			if st.State != tc.state || !strings.Contains(st.Message, tc.says) || !strings.HasPrefix(st.Message, "TauGrid policy: ") {
				t.Errorf("check %s: %q; want %s saying %q", st.State, st.Message, tc.state, tc.says)
			}
			if w.wholeReads != tc.whole {
				t.Errorf("read the Job whole from the API server %d times; want %d", w.wholeReads, tc.whole)
			}
			if mk := got["multikueue-x"]; mk.State != kueue.CheckStatePending || mk.Message != "" {
				t.Errorf("another controller's check was changed: %+v", mk)
			}
		})
	}
}

// TestAWorkloadIsDecidedOnceItHoldsQuota: until Kueue reserves quota the
// Job may still change; the verdict waits for the moment before admission.
func TestAWorkloadIsDecidedOnceItHoldsQuota(t *testing.T) {
	w := newWorld(t)
	w.wl.Status.Conditions = nil
	if st := w.decide(t)["taugrid-policy-default"]; st.State != kueue.CheckStatePending || st.Message != "" {
		t.Errorf("decided %s (%q) before quota was reserved", st.State, st.Message)
	}
}

// TestAWorkloadOfAnotherChecksControllerIsLeftAlone: a check named like
// TauGrid's but decided by another controller is not TauGrid's to set.
func TestAWorkloadOfAnotherChecksControllerIsLeftAlone(t *testing.T) {
	w := newWorld(t)
	w.check.Spec.ControllerName = "example.com/other"
	if st := w.decide(t)["taugrid-policy-default"]; st.State != kueue.CheckStatePending || st.Message != "" {
		t.Errorf("another controller's check set to %s: %q", st.State, st.Message)
	}
}
