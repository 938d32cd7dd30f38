package sealing

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"
)

// The table tests of the evidence controller: the fake client
// (sharedtest), a FileStore in a temporary directory, the example
// platform's policy and research repo's tau.yaml served by fakes. What
// only the real API server and kubelet show (pods/log, events recorded by
// Kueue) is in controllers/integration.

const (
	ns         = "team-a"
	policyHead = "feedface00000000000000000000000000000000"
	// hfToken is the value of Secret hf's key token, which the tau file's
	// env_secret hands the run as HF_TOKEN.
	hfToken = "hf-secret-value-0123456789"
)

var (
	started = sharedtest.Now.Add(-time.Hour)
	ended   = sharedtest.Now.Add(-time.Minute)
	runR    = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "r"}}
)

// fakeFiles serves tau files by path.
type fakeFiles struct{ files map[string][]byte }

func (f *fakeFiles) ReadFile(_ context.Context, _ *taugridv1.TauRepository, _, commit, path string) ([]byte, error) {
	if d, ok := f.files[path]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%s at %s: %w", path, commit, gitsource.ErrNotFound)
}

// fakePolicies serves the platform's policy at policyHead only, parsed
// from its files once, as policy.PolicyStore parses a commit's.
type fakePolicies struct {
	files  map[string][]byte
	parsed *render.Policy
}

func (p *fakePolicies) PolicyAt(_ context.Context, _, commit string) (*render.Policy, error) {
	if commit != policyHead {
		return nil, fmt.Errorf("commit %s: %w", commit, gitsource.ErrNotFound)
	}
	if p.parsed == nil {
		pol, err := render.LoadPolicy(mapFS(p.files))
		if err != nil {
			return nil, err
		}
		p.parsed = pol
	}
	return p.parsed, nil
}

// mapFS serves policy files to render.LoadPolicy.
func mapFS(files map[string][]byte) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: data}
	}
	return fsys
}

// fakeLogs serves container logs by "pod/container".
type fakeLogs map[string]string

func (l fakeLogs) Logs(_ context.Context, _, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	log, ok := l[pod+"/"+opts.Container]
	if !ok {
		return nil, fmt.Errorf("container %s of pod %s has no log", opts.Container, pod)
	}
	return io.NopCloser(strings.NewReader(log)), nil
}

// sealWorld is an evidence recorder on the fake client holding objs.
type sealWorld struct {
	c      client.Client
	store  *evidence.FileStore
	events *events.FakeRecorder
	e      *EvidenceRecorder
}

// The controller's namespace and its attestation key's Secret.
const controllerNS, attestationSecret = "taugrid-system", "tau-attestation-key"

func newSealWorld(t testing.TB, logs fakeLogs, objs ...client.Object) *sealWorld {
	t.Helper()
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := sharedtest.NewClient(objs...)
	w := &sealWorld{c: c, store: st, events: events.NewFakeRecorder(20)}
	w.e = &EvidenceRecorder{Client: c, APIReader: c, Files: &fakeFiles{files: map[string][]byte{"tau.yaml": tauFile(t)}},
		Policies: &fakePolicies{files: policyFiles(t)}, Store: st, Clock: sharedtest.Clock(), Recorder: w.events,
		Attestations: &AttestationKeys{Client: c, Namespace: controllerNS, Name: attestationSecret}}
	if logs != nil {
		w.e.Logs = logs
	}
	return w
}

// tauFile is the research repo's tau.yaml, reading HF_TOKEN from Secret hf.
func tauFile(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("../../examples/research/tau.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(data, []byte("    PYTHONUNBUFFERED: \"1\"\n"), []byte("    PYTHONUNBUFFERED: \"1\"\n  env_secret:\n    HF_TOKEN: \"hf:token\"\n"), 1)
}

// policyFiles are the example platform's policy files.
func policyFiles(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("../../examples/platform/*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no policy files: %v", err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		if files[filepath.Base(n)], err = os.ReadFile(n); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// endedRun is run r of the research repository whose one attempt, of Job
// r-1, ended: Succeeded.
func endedRun() *builders.TauRunBuilder {
	return builders.MakeTauRun("r", ns).PolicyAt(policyHead).Phase(taugridv1.PhaseSucceeded, "").
		Entered(taugridv1.PhaseQueued, started.Add(-time.Minute)).Entered(taugridv1.PhaseRunning, started).Entered(taugridv1.PhaseSucceeded, ended).
		Attempt("r-1", started, ended, "")
}

// sealingRun is endedRun waiting for its evidence to be sealed.
func sealingRun() *builders.TauRunBuilder {
	return endedRun().Condition(shared.ConditionEvidence, metav1.ConditionFalse, shared.ReasonSealing, "attempt 1 ended")
}

// researchRepo is the run's repository, its URL holding credentials.
func researchRepo() *taugridv1.TauRepository {
	return builders.MakeTauRepository("research", ns, "https://bot:git-password-42@git.example.com/team-a/research.git").Obj()
}

// hfSecret holds the token the tau file's env_secret names.
func hfSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf", Namespace: ns}, Data: map[string][]byte{"token": []byte(hfToken)}}
}

// bundle reads the bundle sealed for attempt n of run r: its manifest,
// record and artifacts by name. It fails the test if none is sealed.
func (w *sealWorld) bundle(t *testing.T, n int) (*evidence.Manifest, *evidence.Record, map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	m, _, err := evidence.Load(ctx, w.store, evidence.Key{Namespace: ns, Run: "r", Attempt: n})
	if err != nil {
		t.Fatalf("no bundle of attempt %d: %v", n, err)
	}
	content := map[string][]byte{}
	for _, a := range m.Artifacts {
		if content[a.Name], err = w.store.Blob(ctx, a.SHA256); err != nil {
			t.Fatal(err)
		}
	}
	rec := &evidence.Record{}
	if err := yaml.Unmarshal(content[evidence.ArtifactRecord], rec); err != nil {
		t.Fatal(err)
	}
	return m, rec, content
}

// sealed lists the bundles in the store by key path.
func (w *sealWorld) sealed(t *testing.T) []string {
	t.Helper()
	entries, err := w.store.Manifests(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Path)
	}
	return out
}

// storeHolds lists the stored files that contain s.
func (w *sealWorld) storeHolds(t *testing.T, s string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(w.store.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if bytes.Contains(data, []byte(s)) {
			found = append(found, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func (w *sealWorld) run(t *testing.T) *taugridv1.TauRun {
	t.Helper()
	run := &taugridv1.TauRun{}
	if err := w.c.Get(context.Background(), runR.NamespacedName, run); err != nil {
		t.Fatal(err)
	}
	return run
}

func (w *sealWorld) drained() []string {
	return sharedtest.Drain(w.events)
}
