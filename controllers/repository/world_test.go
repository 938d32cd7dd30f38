package repository

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The table tests of the repository reconciler: its steps on the fake
// client (sharedtest) with an in-memory git (fakeGit), whose polls detect
// with gitsource.Detect, the decision the real client makes, in
// milliseconds. What only a real git server and the API server show is in
// controllers/integration.

const (
	ns      = "team-a"
	repoURL = "https://git.example.com/team-a/research.git"
)

// sha is a made-up object name: c repeated to 40 characters.
func sha(c string) string { return strings.Repeat(c, 40/len(c)) }

// fakeGit is a repository in memory: refs, commits with their tau files,
// and annotated tags. It is also the gitsource.Graph its polls detect in.
type fakeGit struct {
	refs    gitsource.RefSet
	commits map[string]gitsource.Commit
	trees   map[string]map[string]string // commit -> path -> content
	tags    map[string]gitsource.Tag
	// err fails every listing and poll; archiveErr the archives of a
	// commit; sizes overrides an archive's size.
	err        error
	archiveErr map[string]error
	sizes      map[string]int64
	dir        string
	lists      int
	polls      int
	archives   []string // the commits archived, in order
}

func newGit(t testing.TB) *fakeGit {
	return &fakeGit{refs: gitsource.RefSet{}, commits: map[string]gitsource.Commit{}, trees: map[string]map[string]string{},
		tags: map[string]gitsource.Tag{}, archiveErr: map[string]error{}, sizes: map[string]int64{}, dir: t.TempDir()}
}

// commit adds a commit on parent ("" for a root) holding files, authored
// by alice.
func (g *fakeGit) commit(id, parent string, files map[string]string) string {
	c := gitsource.Commit{SHA: id, Author: "Alice <alice@example.com>", Time: sharedtest.Now}
	if parent != "" {
		c.Parents = []string{parent}
	}
	g.commits[id], g.trees[id] = c, files
	return id
}

// annotated adds an annotated tag object on commit with message, and
// returns the ref that names it.
func (g *fakeGit) annotated(id, name, commit, msg string) gitsource.Ref {
	g.tags[id] = gitsource.Tag{SHA: id, Name: name, Target: commit, TargetType: "commit", Tagger: "Bob <bob@example.com>", Message: msg}
	return gitsource.Ref{SHA: id, Peeled: commit}
}

// at is a lightweight ref to commit.
func at(commit string) gitsource.Ref { return gitsource.Ref{SHA: commit} }

func (g *fakeGit) ListRefs(context.Context, gitsource.Remote) (gitsource.RefSet, error) {
	g.lists++
	return maps.Clone(g.refs), g.err
}

func (g *fakeGit) Poll(ctx context.Context, r gitsource.Remote, prev gitsource.RefSet, t gitsource.Triggers) (gitsource.PollResult, error) {
	return g.PollFrom(ctx, r, func(gitsource.RefSet) (gitsource.RefSet, error) { return prev, nil }, t)
}

// PollFrom lists, rebuilds the previous refs and detects, as the real
// client does once it fetched.
func (g *fakeGit) PollFrom(_ context.Context, _ gitsource.Remote, previous gitsource.Previous, t gitsource.Triggers) (gitsource.PollResult, error) {
	g.polls++
	if g.err != nil {
		return gitsource.PollResult{}, g.err
	}
	t = t.WithDefaults()
	refs := maps.Clone(g.refs)
	cur := t.Watched(refs)
	prev, err := previous(cur)
	if err != nil {
		return gitsource.PollResult{}, err
	}
	d, err := gitsource.Detect(prev, cur, t, g)
	if err != nil {
		return gitsource.PollResult{}, err
	}
	return gitsource.PollResult{Refs: cur, Listed: refs, Detection: d}, nil
}

func (g *fakeGit) ReadFile(_ context.Context, _ gitsource.Remote, _, commit, p string) ([]byte, error) {
	if data, ok := g.trees[commit][p]; ok {
		return []byte(data), nil
	}
	return nil, fmt.Errorf("%s at %s: %w", p, commit, gitsource.ErrNotFound)
}

// Archive writes the commit's files as a .tar.gz named by its digest.
func (g *fakeGit) Archive(_ context.Context, _ gitsource.Remote, _, commit string) (*gitsource.Archive, error) {
	g.archives = append(g.archives, commit)
	if err := g.archiveErr[commit]; err != nil {
		return nil, err
	}
	a, err := sharedtest.WriteArchive(g.dir, commit, g.trees[commit])
	if err != nil {
		return nil, err
	}
	if s, ok := g.sizes[commit]; ok {
		a.Size = s
	}
	return a, nil
}

func (g *fakeGit) OpenArchive(digest string) (*os.File, error) {
	return os.Open(filepath.Join(g.dir, digest))
}

// Commit, Tag and TauFiles make fakeGit the graph Detect reads.
func (g *fakeGit) Commit(id string) (gitsource.Commit, error) {
	if c, ok := g.commits[id]; ok {
		return c, nil
	}
	return gitsource.Commit{}, fmt.Errorf("commit %s: %w", id, gitsource.ErrNotFound)
}

func (g *fakeGit) Tag(id string) (gitsource.Tag, error) {
	if tag, ok := g.tags[id]; ok {
		return tag, nil
	}
	return gitsource.Tag{}, fmt.Errorf("tag %s: %w", id, gitsource.ErrNotFound)
}

func (g *fakeGit) TauFiles(commit string, patterns []string) (map[string]string, error) {
	files, ok := g.trees[commit]
	if !ok {
		return nil, fmt.Errorf("tree of %s: %w", commit, gitsource.ErrNotFound)
	}
	out := map[string]string{}
	for p, data := range files {
		for _, pattern := range patterns {
			if ok, _ := path.Match(pattern, p); ok {
				out[p] = "blob:" + data
			}
		}
	}
	return out, nil
}

// signingGit is a fakeGit that verifies signatures: every one is made by
// signer, or fails with err. It records what it was asked to check.
type signingGit struct {
	*fakeGit
	signer  gitsource.Signer
	err     error
	checked []string
}

func (s *signingGit) VerifyTag(_ context.Context, _ gitsource.Remote, tag string, keys *gitsource.KeyRing, _ time.Time) (gitsource.Signer, error) {
	s.checked = append(s.checked, "tag "+tag)
	signer := s.signer
	if t, err := s.Tag(tag); err == nil && s.err == nil {
		signer.Tag = t.Name // the name the signature covers
	}
	return signer, s.err
}

func (s *signingGit) VerifyCommit(_ context.Context, _ gitsource.Remote, commit string, keys *gitsource.KeyRing, _ time.Time) (gitsource.Signer, error) {
	s.checked = append(s.checked, "commit "+commit)
	return s.signer, s.err
}

// repoWorld is a repository reconciler on the fake client, with the
// example platform's policy and an in-memory git.
type repoWorld struct {
	r      *RepositoryReconciler
	c      client.Client
	git    *fakeGit
	events *events.FakeRecorder
}

// newRepoWorld holds objs; faults, if any, intercept the client's calls.
func newRepoWorld(t testing.TB, faults *interceptor.Funcs, objs ...client.Object) *repoWorld {
	t.Helper()
	b := sharedtest.Builder(objs...)
	if faults != nil {
		b = b.WithInterceptorFuncs(*faults)
	}
	c := b.Build()
	w := &repoWorld{c: c, git: newGit(t), events: events.NewFakeRecorder(100)}
	w.r = &RepositoryReconciler{Client: c, Git: w.git, Policies: filePolicy{policy: examplePolicy(t)},
		Clock: sharedtest.Clock(), Recorder: w.events}
	return w
}

// research is the repository most tests poll: team-a's, default triggers.
func research() *builders.TauRepositoryBuilder {
	return builders.MakeTauRepository("research", ns, repoURL)
}

func (w *repoWorld) reconcile(t testing.TB) (reconcile.Result, error) {
	t.Helper()
	return w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "research"}})
}

// mustReconcile reconciles and fails the test on an error.
func (w *repoWorld) mustReconcile(t testing.TB) {
	t.Helper()
	if _, err := w.reconcile(t); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

func (w *repoWorld) repo(t testing.TB) *taugridv1.TauRepository {
	t.Helper()
	repo := &taugridv1.TauRepository{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "research"}, repo); err != nil {
		t.Fatal(err)
	}
	return repo
}

func (w *repoWorld) runs(t testing.TB) []taugridv1.TauRun {
	t.Helper()
	var list taugridv1.TauRunList
	if err := w.c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b taugridv1.TauRun) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// drain is the events recorded since the last drain.
func (w *repoWorld) drain() []string {
	return sharedtest.Drain(w.events)
}

// reasons is each event's type and reason, without its note.
var reasons = sharedtest.Reasons

// runSummary is what a test says of a TauRun the poll created.
type runSummary struct {
	Name, Kind, Ref, Commit, Target, Requester, RefObject string
	Overrides                                             map[string]string
}

// want is the run of research for ref at commit, with its deterministic
// name; object is the annotated tag, "" for the commit.
func want(kind taugridv1.TriggerKind, ref, commit, target, requester, object string) runSummary {
	if object == "" {
		object = commit
	}
	return runSummary{Name: runs.RunName("research", ref, commit, target), Kind: string(kind), Ref: ref, Commit: commit,
		Target: target, Requester: requester, RefObject: object}
}

func summarize(list []taugridv1.TauRun) []runSummary {
	var out []runSummary
	for _, r := range list {
		out = append(out, runSummary{Name: r.Name, Kind: string(r.Spec.Trigger.Kind), Ref: r.Spec.Trigger.Ref, Commit: r.Spec.Commit,
			Target: r.Spec.Target, Requester: r.Spec.Trigger.Requester, RefObject: r.Annotations[AnnotationRefObject],
			Overrides: r.Spec.Trigger.Overrides})
	}
	return out
}

// conditions are the repository's conditions as "Type=Status/Reason".
func conditions(repo *taugridv1.TauRepository) []string {
	return sharedtest.Conditions(repo.Status.Conditions)
}

// readyMessage is the Ready condition's message, "" without one.
func readyMessage(repo *taugridv1.TauRepository) string {
	if c := apimeta.FindStatusCondition(repo.Status.Conditions, taugridv1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// secret is a Secret of the test namespace holding data.
func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}
