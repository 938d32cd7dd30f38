package run

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"os"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The table tests of the run reconciler: its branches on the fake client
// (sharedtest), with the example platform's policy and research repo's
// tau.yaml, in milliseconds. What only the real API server, Kueue and the
// scheduler show is in controllers/integration.

const (
	ns         = "team-a"
	policyHead = "feedface00000000000000000000000000000000"
)

// fakeFiles serves tau files by path and counts the reads.
type fakeFiles struct {
	files map[string][]byte
	reads int
	err   error
}

func (f *fakeFiles) ReadFile(_ context.Context, _ *taugridv1.TauRepository, _, commit, path string) ([]byte, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if d, ok := f.files[path]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%s at %s: %w", path, commit, gitsource.ErrNotFound)
}

// fakePolicies is the platform's policy in force, or err.
type fakePolicies struct {
	pol    *render.Policy
	commit string
	err    error
}

func (p *fakePolicies) Policy(context.Context, string) (*render.Policy, string, error) {
	return p.pol, p.commit, p.err
}

func examplePolicy(t testing.TB) *render.Policy {
	t.Helper()
	pol, err := render.LoadPolicy(os.DirFS("../../examples/platform"))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func exampleTauFile(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("../../examples/research/tau.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// runWorld is a run reconciler on the fake client holding objs, the
// example policy and tau.yaml.
type runWorld struct {
	r        *RunReconciler
	c        client.Client
	files    *fakeFiles
	policies *fakePolicies
	events   *events.FakeRecorder
}

func newRunWorld(t testing.TB, faults *interceptor.Funcs, objs ...client.Object) *runWorld {
	t.Helper()
	repo := builders.MakeTauRepository("research", ns, "https://git.example.com/team-a/research.git").Obj()
	b := sharedtest.Builder(append([]client.Object{repo}, objs...)...)
	if faults != nil {
		b = b.WithInterceptorFuncs(*faults)
	}
	c := b.Build()
	w := &runWorld{c: c, files: &fakeFiles{files: map[string][]byte{"tau.yaml": exampleTauFile(t)}},
		policies: &fakePolicies{pol: examplePolicy(t), commit: policyHead}, events: events.NewFakeRecorder(100)}
	w.r = &RunReconciler{Client: c, Scheme: sharedtest.Scheme(), Clock: sharedtest.Clock(), Recorder: w.events,
		Files: w.files, Policies: w.policies, Indexed: true}
	return w
}

func (w *runWorld) reconcile(t testing.TB, name string) (reconcile.Result, error) {
	t.Helper()
	return w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
}

func (w *runWorld) run(t testing.TB, name string) *taugridv1.TauRun {
	t.Helper()
	run := &taugridv1.TauRun{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, run); err != nil {
		t.Fatal(err)
	}
	return run
}

func (w *runWorld) jobs(t testing.TB) []batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	if err := w.c.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return jobs.Items
}

func condition(run *taugridv1.TauRun, t string) string {
	c := apimeta.FindStatusCondition(run.Status.Conditions, t)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

func TestSubmissionBranches(t *testing.T) {
	cases := map[string]struct {
		run      *taugridv1.TauRun
		setup    func(*runWorld)
		faults   *interceptor.Funcs
		wantErr  bool
		phase    taugridv1.RunPhase
		jobs     int
		ready    string // the Ready condition, status/reason
		observed bool   // observedGeneration moved to the generation
		requeue  time.Duration
	}{
		"a new run is submitted to its tenant's queue, suspended": {
			run: builders.MakeTauRun("r1", ns).UID("u1").Obj(), phase: taugridv1.PhaseQueued, jobs: 1, observed: true, requeue: submitRecheck},
		"a tau.yaml that does not parse fails the run and submits nothing": {
			run:   builders.MakeTauRun("r1", ns).UID("u1").Obj(),
			setup: func(w *runWorld) { w.files.files["tau.yaml"] = []byte("schema_version: 1\ncompute: [\n") },
			phase: taugridv1.PhaseFailed, ready: "False/" + ReasonInvalidConfig, observed: true, requeue: submitRecheck},
		"a target whose tau file is not at the commit fails the run": {
			run:   builders.MakeTauRun("r1", ns).UID("u1").Obj(),
			setup: func(w *runWorld) { delete(w.files.files, "tau.yaml") },
			phase: taugridv1.PhaseFailed, ready: "False/" + ReasonInvalidConfig, observed: true, requeue: submitRecheck},
		"a platform with no policy yet keeps the run pending, its generation not handled": {
			run:   builders.MakeTauRun("r1", ns).UID("u1").Obj(),
			setup: func(w *runWorld) { w.policies.err = fmt.Errorf("platform default: %w", policy.ErrNoPolicyYet) },
			phase: taugridv1.PhasePending, requeue: 10 * time.Second},
		"git unavailable is a transient error, retried with backoff": {
			run:     builders.MakeTauRun("r1", ns).UID("u1").Obj(),
			setup:   func(w *runWorld) { w.files.err = errors.New("git: connection refused") },
			wantErr: true, phase: taugridv1.PhasePending},
		"a namespace that is no tenant's fails the run": {
			run:   builders.MakeTauRun("r1", "team-a").UID("u1").Obj(),
			setup: func(w *runWorld) { w.policies.pol.Tenants = nil },
			phase: taugridv1.PhaseFailed, ready: "False/" + ReasonInvalidConfig, observed: true, requeue: submitRecheck},
		"the API server refusing the Job now is transient: nothing recorded as submitted": {
			run: builders.MakeTauRun("r1", ns).UID("u1").Obj(),
			faults: &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
				if _, ok := o.(*batchv1.Job); ok {
					return apierrors.NewServiceUnavailable("etcd is busy")
				}
				return c.Create(ctx, o, opts...)
			}},
			wantErr: true, phase: taugridv1.PhasePending},
		"a retry waits out its backoff before it is submitted": {
			run: builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhasePending, "retrying").
				Attempt("r1-1", sharedtest.Now.Add(-time.Minute), sharedtest.Now.Add(-10*time.Second), taugridv1.FailurePreempted).Obj(),
			phase: taugridv1.PhasePending, requeue: 20 * time.Second, observed: true},
		"a cancelled run that never ran is cancelled at once": {
			run:   builders.MakeTauRun("r1", ns).UID("u1").Cancel().Obj(),
			phase: taugridv1.PhaseCancelled, ready: "False/" + ReasonCancelled, observed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRunWorld(t, tc.faults, tc.run)
			if tc.setup != nil {
				tc.setup(w)
			}
			res, err := w.reconcile(t, tc.run.Name)
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile: err %v, want an error: %v", err, tc.wantErr)
			}
			got := w.run(t, tc.run.Name)
			if got.Status.Phase != tc.phase {
				t.Errorf("phase %q (%s), want %q", got.Status.Phase, got.Status.Message, tc.phase)
			}
			if n := len(w.jobs(t)); n != tc.jobs {
				t.Errorf("%d Jobs, want %d", n, tc.jobs)
			}
			if c := condition(got, taugridv1.ConditionReady); tc.ready != "" && c != tc.ready {
				t.Errorf("Ready %q, want %q", c, tc.ready)
			}
			if observed := got.Status.ObservedGeneration == got.Generation; observed != tc.observed {
				t.Errorf("observedGeneration %d at generation %d: handled %v, want %v", got.Status.ObservedGeneration, got.Generation, observed, tc.observed)
			}
			if !tc.wantErr && res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
		})
	}
}

// TestASubmittedJobIsSuspendedQueuedAndOwned: Kueue admits and starts the
// Job; TauGrid only ever creates it suspended, in the tenant's queue, owned
// by the run, and says so on the run.
func TestASubmittedJobIsSuspendedQueuedAndOwned(t *testing.T) {
	w := newRunWorld(t, nil, builders.MakeTauRun("r1", ns).UID("u1").Obj())
	if _, err := w.reconcile(t, "r1"); err != nil {
		t.Fatal(err)
	}
	jobs := w.jobs(t)
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(jobs))
	}
	j := jobs[0]
	if j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Error("the Job is not suspended: Kueue must start it")
	}
	if !metav1.IsControlledBy(&j, w.run(t, "r1")) {
		t.Errorf("the Job's owners %v do not name the run as controller", j.OwnerReferences)
	}
	run := w.run(t, "r1")
	fp, err := render.FingerprintOf(&j)
	if err != nil {
		t.Fatal(err)
	}
	want := &taugridv1.WorkloadStatus{Kind: "Job", Name: j.Name, Queue: j.Labels[render.LabelQueueName],
		UID: j.UID, Digest: fp.Digest, FieldDigests: fp.Short(), Generation: j.Generation, LabelsDigest: fp.Labels}
	if diff := cmp.Diff(want, run.Status.Workload); diff != "" {
		t.Errorf("status.workload (-want +got), recording the Job as stored:\n%s", diff)
	}
	if run.Status.Workload.Queue == "" {
		t.Error("the Job names no Kueue queue")
	}
	if len(run.Status.Attempts) != 1 || run.Status.Attempts[0].Workload != j.Name {
		t.Errorf("attempts %+v, want one, of %s", run.Status.Attempts, j.Name)
	}
	if run.Status.PolicyCommit != policyHead || run.Status.ConfigDigest == "" || run.Status.TauFile != "tau.yaml" {
		t.Errorf("planned from %q %q %q, want the policy head, a digest and tau.yaml", run.Status.PolicyCommit, run.Status.ConfigDigest, run.Status.TauFile)
	}
}

func TestEndedAndVanishedRuns(t *testing.T) {
	cases := map[string]struct {
		run     *taugridv1.TauRun
		requeue time.Duration
	}{
		"a run that is gone is done": {},
		"a run being deleted is left to its finalizers": {
			run: builders.MakeTauRun("r1", ns).UID("u1").Deleting("example.com/hold").Obj()},
		"an ended run whose evidence is sealing waits for the seal, at most sealRecheck": {
			run: builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseSucceeded, "succeeded").
				Condition(shared.ConditionEvidence, metav1.ConditionFalse, shared.ReasonSealing, "sealing").Obj(),
			requeue: SealRecheck},
		"an ended run with nothing held is done": {
			run: builders.MakeTauRun("r1", ns).UID("u1").Phase(taugridv1.PhaseFailed, "failed").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			if tc.run != nil {
				objs = append(objs, tc.run)
			}
			w := newRunWorld(t, nil, objs...)
			res, err := w.reconcile(t, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			if n := len(w.jobs(t)); n != 0 {
				t.Errorf("%d Jobs created for a run that is not to run", n)
			}
		})
	}
}

var errTestGit = errors.New("git: connection refused")
