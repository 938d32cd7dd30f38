package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/test/builders"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taugrid/taugrid/policy"
)

// The table tests of the platform reconciler: its steps on the fake client
// (sharedtest) with an in-memory platform repo (fakeGit), in milliseconds.
// The fake client applies server-side only roughly (no field ownership
// conflicts, no admission webhooks, a dry run that checks nothing), so
// these tests observe the apply calls and fail them on purpose; what
// Kueue's webhooks and the API server's merge do is in
// controllers/integration (platform_test.go, multicluster_*_test.go).

const (
	platformName = "default"
	platformURL  = "https://git.example.com/platform.git"
	mainRef      = "refs/heads/main"
)

// sha is a made-up object name: c repeated to 40 characters.
func sha(c string) string { return strings.Repeat(c, 40/len(c)) }

// fakeGit is a platform repo in memory: where its refs point and each
// commit's files. It implements only what the platform reconciler calls.
type fakeGit struct {
	policy.Git // the rest: never called here

	refs       gitsource.RefSet
	trees      map[string]map[string]string // commit -> path -> content
	listErr    error
	archiveErr error
	dir        string
	lists      int
	auth       []gitsource.Credentials // each listing's credentials
	archives   []string                // the commits archived, in order
}

func newGit(t testing.TB) *fakeGit {
	return &fakeGit{refs: gitsource.RefSet{}, trees: map[string]map[string]string{}, dir: t.TempDir()}
}

// push makes main point at commit, holding files.
func (g *fakeGit) push(commit string, files map[string]string) {
	g.trees[commit] = files
	g.refs[mainRef] = gitsource.Ref{SHA: commit}
}

func (g *fakeGit) ListRefs(_ context.Context, r gitsource.Remote) (gitsource.RefSet, error) {
	g.lists++
	g.auth = append(g.auth, r.Auth)
	if g.listErr != nil {
		return nil, g.listErr
	}
	return maps.Clone(g.refs), nil
}

// Archive writes the commit's files as a .tar.gz named by its digest.
func (g *fakeGit) Archive(_ context.Context, _ gitsource.Remote, _, commit string) (*gitsource.Archive, error) {
	g.archives = append(g.archives, commit)
	if g.archiveErr != nil {
		return nil, g.archiveErr
	}
	files, ok := g.trees[commit]
	if !ok {
		return nil, fmt.Errorf("commit %s: %w", commit, gitsource.ErrNotFound)
	}
	return sharedtest.WriteArchive(g.dir, commit, files)
}

func (g *fakeGit) OpenArchive(digest string) (*os.File, error) {
	return os.Open(filepath.Join(g.dir, digest))
}

// exampleTree is the example platform repo's files, with edits applied:
// a path mapped to "" is removed, any other replaced or added.
func exampleTree(t testing.TB, edits map[string]string) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := os.DirFS("../../examples/platform")
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, p)
		files[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, data := range edits {
		if data == "" {
			delete(files, p)
		} else {
			files[p] = data
		}
	}
	return files
}

// applyCall is one server-side apply the reconciler sent.
type applyCall struct {
	Kind, Name string
	DryRun     bool
}

func (a applyCall) String() string {
	if a.DryRun {
		return "dry-run " + a.Kind + " " + a.Name
	}
	return a.Kind + " " + a.Name
}

// platformWorld is a platform reconciler on the fake client, with an
// in-memory platform repo; it records every apply and delete sent.
type platformWorld struct {
	r       *PlatformReconciler
	c       client.Client
	git     *fakeGit
	events  *events.FakeRecorder
	applied []applyCall
	deleted []string
	// refuseApply, when set, answers each apply: an error fails it.
	refuseApply func(applyCall) error
}

// newWorld holds objs; faults, if any, intercept the client's calls after
// the world recorded them (a Delete fault decides the outcome of the
// delete it sees). Applies are the world's: it records each, fails those
// refuseApply refuses, and writes nothing for a dry run, as the API
// server does (controller-runtime v0.25's fake client drops DryRun from
// an Apply's options and writes the object).
func newWorld(t testing.TB, faults *interceptor.Funcs, objs ...client.Object) *platformWorld {
	t.Helper()
	w := &platformWorld{git: newGit(t), events: events.NewFakeRecorder(100)}
	var f interceptor.Funcs
	if faults != nil {
		f = *faults
	}
	del := f.Delete
	f.Apply = func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
		call := describeApply(obj, opts)
		w.applied = append(w.applied, call)
		if w.refuseApply != nil {
			if err := w.refuseApply(call); err != nil {
				return err
			}
		}
		if call.DryRun {
			return nil
		}
		return c.Apply(ctx, obj, opts...)
	}
	f.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		w.deleted = append(w.deleted, obj.GetObjectKind().GroupVersionKind().Kind+" "+qualifiedNameOf(obj))
		if del != nil {
			return del(ctx, c, obj, opts...)
		}
		return c.Delete(ctx, obj, opts...)
	}
	w.c = sharedtest.Builder(objs...).WithInterceptorFuncs(f).Build()
	w.r = &PlatformReconciler{Client: w.c, Git: w.git, Policies: &policy.PolicyStore{Client: w.c, Git: w.git, Namespace: "taugrid-system"},
		Clock: sharedtest.Clock(), Recorder: w.events}
	return w
}

// describeApply says what an apply call applies; an object it cannot
// read is "unreadable" (and fails the comparison that meets it).
func describeApply(obj runtime.ApplyConfiguration, opts []client.ApplyOption) applyCall {
	u := &unstructured.Unstructured{}
	if data, err := json.Marshal(obj); err != nil || json.Unmarshal(data, &u.Object) != nil {
		return applyCall{Kind: "unreadable"}
	}
	o := &client.ApplyOptions{}
	o.ApplyOptions(opts)
	return applyCall{Kind: u.GetKind(), Name: qualifiedName(u), DryRun: slices.Contains(o.DryRun, "All")}
}

func qualifiedNameOf(o client.Object) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// platform is the TauPlatform most tests reconcile.
func platform() *builders.TauPlatformBuilder {
	return builders.MakeTauPlatform(platformName, platformURL)
}

func (w *platformWorld) reconcile(t testing.TB) (reconcile.Result, error) {
	t.Helper()
	return w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: platformName}})
}

// mustReconcile reconciles and fails the test on an error.
func (w *platformWorld) mustReconcile(t testing.TB) {
	t.Helper()
	if _, err := w.reconcile(t); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

func (w *platformWorld) platform(t testing.TB) *taugridv1.TauPlatform {
	t.Helper()
	p := &taugridv1.TauPlatform{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: platformName}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// drain is the events recorded since the last drain, each as
// "Type Reason" and the first line of its note.
func (w *platformWorld) drain() []string {
	return sharedtest.Drain(w.events)
}

// reasons is each event's type and reason, without its note.
var reasons = sharedtest.Reasons

// conditions are the platform's conditions as "Type=Status/Reason".
func conditions(p *taugridv1.TauPlatform) []string {
	return sharedtest.Conditions(p.Status.Conditions)
}

// condition is the message of the platform's condition of type t, "" if
// it has none.
func condition(p *taugridv1.TauPlatform, t string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}

// polledAt is the platform's last poll time, zero if never.
func polledAt(p *taugridv1.TauPlatform) time.Time {
	if p.Status.LastPollTime == nil {
		return time.Time{}
	}
	return p.Status.LastPollTime.Time
}

// list names the objects of kind (a Kueue kind, or Namespace) in the
// fake client, each with the platform that applied it ("" for none).
func (w *platformWorld) list(t testing.TB, kind string) []string {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	if kind == "Namespace" {
		l.SetAPIVersion("v1")
	} else {
		l.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	}
	l.SetKind(kind + "List")
	if err := w.c.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range l.Items {
		u := &l.Items[i]
		out = append(out, qualifiedName(u)+" by "+u.GetLabels()[taugridv1.LabelPlatform])
	}
	slices.Sort(out)
	return out
}
