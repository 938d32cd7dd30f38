package reconciler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/reconciler/forge"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// One Gitea for the package's forge tests, started on first use.
var (
	giteaOnce sync.Once
	giteaSrv  *controlplane.Gitea
	giteaErr  error
)

// sharedGitea is the package's Gitea. It skips in -short mode and when
// Gitea is not built, except with CI=true, where a missing Gitea fails.
func sharedGitea(t *testing.T) *controlplane.Gitea {
	t.Helper()
	integration(t)
	if _, err := controlplane.GiteaBinary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and Gitea is missing: %v", err)
		}
		t.Skipf("Gitea is missing (%v)", err)
	}
	giteaOnce.Do(func() { giteaSrv, giteaErr = controlplane.StartGitea(context.Background()) })
	if giteaErr != nil {
		t.Fatalf("starting Gitea: %v", giteaErr)
	}
	return giteaSrv
}

// giteaFixture is a run fixture whose repository lives on the real Gitea
// and reports there, driven by a real manager.
type giteaFixture struct {
	*runFixture
	gitea *controlplane.Gitea
	name  string // owner/name on Gitea
}

func newGiteaFixture(t *testing.T, prefix string) *giteaFixture {
	t.Helper()
	g := sharedGitea(t)
	f := &giteaFixture{runFixture: newRunFixture(t, prefix), gitea: g}
	f.name = f.ns + "/research"
	ctx := context.Background()
	if err := g.CreateRepo(ctx, f.name); err != nil {
		t.Fatal(err)
	}
	f.research.git("-C", f.research.work, "remote", "add", "gitea", g.PushURL(f.name))
	f.push("main")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge", Namespace: f.ns},
		Data: map[string][]byte{gitsource.SecretToken: []byte(g.Token)}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	base := f.repo.DeepCopy()
	f.repo.Spec.URL = g.CloneURL(f.name)
	f.repo.Spec.Forge = &taugridv1.Forge{Type: taugridv1.ForgeType(forge.Gitea), SecretRef: taugridv1.LocalObjectReference{Name: "forge"}}
	if err := k8s.Patch(ctx, f.repo, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.poll(t) // what Gitea holds now is the starting point
	return f
}

// push pushes refs to Gitea with the git CLI, in one push.
func (f *giteaFixture) push(refs ...string) {
	f.research.git(append([]string{"-C", f.research.work, "push", "--quiet", "--force", "gitea"}, refs...)...)
}

// taggedCommits makes n commits, each tagged run/<prefix>-<i>, pushed at
// once; it returns the commits by tag.
func (f *giteaFixture) taggedCommits(prefix string, n int) map[string]string {
	commits := map[string]string{}
	refs := []string{"main"}
	for i := range n {
		tag := fmt.Sprintf("run/%s-%02d", prefix, i)
		f.research.git("-C", f.research.work, "commit", "--quiet", "--allow-empty", "-m", tag)
		f.research.git("-C", f.research.work, "tag", tag)
		commits[tag] = f.research.git("-C", f.research.work, "rev-parse", "HEAD")
		refs = append(refs, "refs/tags/"+tag)
	}
	f.push(refs...)
	return commits
}

// statuses lists what Gitea holds for a run's context on its commit.
func (f *giteaFixture) statuses(t *testing.T, run *taugridv1.TauRun) []controlplane.GiteaStatus {
	t.Helper()
	all, err := f.gitea.CommitStatuses(context.Background(), f.name, run.Spec.Commit)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := forge.Desired(run).Context
	return slices.DeleteFunc(all, func(s controlplane.GiteaStatus) bool { return s.Context != ctxName })
}

// completeAdmittedJobs completes every Job Kueue admitted (unsuspended),
// as the Job controller would once its pod exits 0.
func (f *giteaFixture) completeAdmittedJobs(t *testing.T) {
	t.Helper()
	for _, j := range f.jobs(t) {
		if j.Spec.Suspend != nil && *j.Spec.Suspend || jobDone(&j) {
			continue
		}
		completeJob(t, f.ns, j.Name)
	}
}

func jobDone(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// postedTwice names the statuses of one context that Gitea holds more
// than once.
func postedTwice(statuses []controlplane.GiteaStatus) []string {
	seen := map[string]int{}
	var twice []string
	for _, s := range statuses {
		key := s.State + ": " + s.Description
		if seen[key]++; seen[key] == 2 {
			twice = append(twice, key)
		}
	}
	return twice
}

// Fifty run tags pushed at once, on fifty commits, through a queue of 8
// GPUs and a controller restart midway: Gitea holds each status of each
// run exactly once, and every run ends with one success.
func TestFiftyRunsPushedAtOnceShowEachStateOnceOnGitea(t *testing.T) {
	f := newGiteaFixture(t, "fg1")
	setGPUQuota(t, f.ns, "8", "0")
	m := startManager(t)
	defer func() { m.stop() }()
	start := time.Now()
	commits := f.taggedCommits("many", 50)
	if err := m.nudger.Nudge(context.Background(), f.repo.Spec.URL); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if t.Failed() {
			for _, r := range f.listRuns(t) {
				if r.Status.Phase != taugridv1.PhaseSucceeded {
					t.Logf("%s: %s %q attempts=%d workload=%+v", r.Name, r.Status.Phase, r.Status.Message, len(r.Status.Attempts), r.Status.Workload)
					var wls kueue.WorkloadList
					_ = k8s.List(context.Background(), &wls, client.InNamespace(f.ns))
					for _, w := range wls.Items {
						if strings.HasPrefix(w.Name, "job-"+r.Name) {
							t.Logf("  workload %s: %+v", w.Name, w.Status.Conditions)
						}
					}
					j := &batchv1.Job{}
					err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: r.Name + "-1"}, j)
					t.Logf("  job: %v suspend=%v status=%+v", err, j.Spec.Suspend != nil && *j.Spec.Suspend, j.Status)
				}
			}
		}
	}()
	waitFor(t, 3*time.Minute, "50 runs to succeed", func() bool {
		f.completeAdmittedJobs(t)
		runs := f.listRuns(t)
		done := 0
		for _, r := range runs {
			if r.Status.Phase == taugridv1.PhaseSucceeded {
				done++
			}
		}
		if done >= 20 && !restarted {
			m.stop() // the controller restarts midway
			m, restarted = startManager(t), true
		}
		return len(runs) == 50 && done == 50
	})
	t.Logf("50 runs pushed at once succeeded %s later", time.Since(start).Round(time.Millisecond))
	runs := f.listRuns(t)
	waitFor(t, 30*time.Second, "every commit to show success", func() bool {
		for i := range runs {
			if st := f.statuses(t, &runs[i]); len(st) == 0 || st[len(st)-1].State != "success" {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // a late duplicate would land by now
	var lat latencies
	posts := 0
	for i := range runs {
		run := &runs[i]
		if commits[strings.TrimPrefix(run.Spec.Trigger.Ref, "refs/tags/")] != run.Spec.Commit {
			t.Errorf("run %s is on %s, not its tag's commit", run.Name, run.Spec.Commit)
		}
		st := f.statuses(t, run)
		posts += len(st)
		if twice := postedTwice(st); len(twice) > 0 {
			t.Errorf("run %s: Gitea holds %q more than once (all: %v)", run.Name, twice, st)
		}
		lat.add(run, st)
	}
	t.Logf("%d statuses for 50 runs; phase change to Gitea's status, whole seconds: %s", posts, lat)
}

// latencies collects, per phase, the seconds from a run entering the phase
// (status.phases) to Gitea creating the status that shows it.
type latencies map[taugridv1.RunPhase][]time.Duration

// phasePrefix is how each phase's status description begins.
var phasePrefix = map[taugridv1.RunPhase]string{
	taugridv1.PhasePending: "accepted", taugridv1.PhaseQueued: "queued", taugridv1.PhaseAdmitted: "admitted",
	taugridv1.PhaseRunning: "running", taugridv1.PhaseSucceeded: "succeeded",
}

func (l *latencies) add(run *taugridv1.TauRun, st []controlplane.GiteaStatus) {
	if *l == nil {
		*l = latencies{}
	}
	for _, p := range run.Status.Phases {
		for _, s := range st {
			if prefix := phasePrefix[p.Phase]; prefix != "" && strings.HasPrefix(s.Description, prefix) {
				(*l)[p.Phase] = append((*l)[p.Phase], s.Created.Sub(p.Time.Time))
				break
			}
		}
	}
}

func (l latencies) String() string {
	var b strings.Builder
	for _, p := range []taugridv1.RunPhase{taugridv1.PhasePending, taugridv1.PhaseQueued, taugridv1.PhaseAdmitted, taugridv1.PhaseSucceeded} {
		d := slices.Sorted(slices.Values(l[p]))
		if len(d) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s n=%d median %s max %s; ", p, len(d), d[len(d)/2], d[len(d)-1])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// seenAt records, polling every 25 ms, when a run was first seen in
// each phase and when Gitea first held a status for it.
type seenAt struct {
	phase map[taugridv1.RunPhase]time.Time
	post  map[taugridv1.RunPhase]time.Time
}

func (f *giteaFixture) watch(t *testing.T, fs *seenAt, name string) *taugridv1.TauRun {
	t.Helper()
	run := &taugridv1.TauRun{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, run); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, ok := fs.phase[run.Status.Phase]; !ok {
		fs.phase[run.Status.Phase] = now
	}
	for _, s := range f.statuses(t, run) {
		for p, prefix := range phasePrefix {
			if _, ok := fs.post[p]; !ok && strings.HasPrefix(s.Description, prefix) {
				fs.post[p] = now
			}
		}
	}
	return run
}

// A run that queues behind another, then runs and succeeds: each phase
// reaches the commit within 2 s, and the queued explanation is there
// before the run is admitted.
func TestEachPhaseReachesGiteaWithinTwoSeconds(t *testing.T) {
	f := newGiteaFixture(t, "fg2")
	setGPUQuota(t, f.ns, "1", "0")
	m := startManager(t)
	defer m.stop()
	commits := f.taggedCommits("blocker", 1)
	if err := m.nudger.Nudge(context.Background(), f.repo.Spec.URL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the blocker to be admitted", func() bool {
		return len(f.listRuns(t)) == 1 && f.listRuns(t)[0].Status.Phase == taugridv1.PhaseAdmitted
	})
	blocker := f.listRuns(t)[0]
	commits = f.taggedCommits("waiter", 1)
	if err := m.nudger.Nudge(context.Background(), f.repo.Spec.URL); err != nil {
		t.Fatal(err)
	}
	var name string
	waitFor(t, 30*time.Second, "the waiter's run", func() bool {
		for _, r := range f.listRuns(t) {
			if r.Spec.Commit == commits["run/waiter-00"] {
				name = r.Name
			}
		}
		return name != ""
	})
	fs := &seenAt{phase: map[taugridv1.RunPhase]time.Time{}, post: map[taugridv1.RunPhase]time.Time{}}
	var run *taugridv1.TauRun
	waitFor(t, 30*time.Second, "the waiter's explanation on its commit", func() bool {
		run = f.watch(t, fs, name)
		st := f.statuses(t, run)
		return len(st) > 0 && strings.HasPrefix(st[len(st)-1].Description, "queued #1 of 1")
	})
	time.Sleep(time.Second) // queued for a while
	completeJob(t, f.ns, blocker.Status.Workload.Name)
	waitFor(t, 30*time.Second, "the waiter to be admitted and shown so", func() bool {
		run = f.watch(t, fs, name)
		_, posted := fs.post[taugridv1.PhaseAdmitted]
		return posted
	})
	completeJob(t, f.ns, run.Status.Workload.Name)
	waitFor(t, 30*time.Second, "the waiter's success on its commit", func() bool {
		run = f.watch(t, fs, name)
		_, posted := fs.post[taugridv1.PhaseSucceeded]
		return posted
	})
	var lat latencies
	st := f.statuses(t, run)
	lat.add(run, st)
	var seen []string
	for _, p := range []taugridv1.RunPhase{taugridv1.PhaseQueued, taugridv1.PhaseAdmitted, taugridv1.PhaseSucceeded} {
		d := fs.post[p].Sub(fs.phase[p])
		seen = append(seen, fmt.Sprintf("%s %s", p, d.Round(time.Millisecond)))
		if fs.phase[p].IsZero() || fs.post[p].IsZero() || d > 2*time.Second {
			t.Errorf("%s: seen in the run at %v, on the commit at %v (%v later), want within 2s", p, fs.phase[p], fs.post[p], d)
		}
		if got := lat[p]; len(got) != 1 || got[0] > 2*time.Second {
			t.Errorf("%s: Gitea created its status %v after the phase began (whole seconds), want within 2s", p, got)
		}
	}
	if twice := postedTwice(st); len(twice) > 0 {
		t.Errorf("posted more than once: %q", twice)
	}
	var descs []string
	for _, s := range st {
		descs = append(descs, s.State+": "+s.Description)
	}
	t.Logf("seen in the run -> seen on the commit: %s; whole seconds by Gitea's clock: %s; statuses: %q", strings.Join(seen, ", "), lat, descs)
}

// A Gitea webhook pointed at the controller's receiver path nudges a
// poll: a pushed run tag becomes a run long before the 1 m poll interval.
func TestAGiteaWebhookAtTheReceiverPathNudgesAPoll(t *testing.T) {
	f := newGiteaFixture(t, "fg3")
	ctx := context.Background()
	hookSecret := []byte("fg3-webhook-secret")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: f.ns}, Data: map[string][]byte{gitsource.SecretToken: hookSecret}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	base := f.repo.DeepCopy()
	f.repo.Spec.Webhook = &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: "hook"}}
	if err := k8s.Patch(ctx, f.repo, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	m := startManager(t)
	defer m.stop()
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{id}", gitsource.NewWebhookHandler(&server.WebhookReceivers{Client: m.client, Forge: gitsource.ForgeGitHub},
		m.nudger, gitsource.WebhookOptions{}))
	receiver := httptest.NewServer(mux)
	defer receiver.Close()
	// The receiver path as the repository's status publishes it, after the
	// manager's first poll.
	var path string
	waitFor(t, 30*time.Second, "the manager's first poll of the Gitea repository to publish the webhook path", func() bool {
		repo := &taugridv1.TauRepository{}
		if k8s.Get(ctx, client.ObjectKeyFromObject(f.repo), repo) != nil || repo.Status.ObservedGeneration != repo.Generation {
			return false
		}
		path = repo.Status.WebhookPath
		return path != ""
	})
	if err := f.gitea.CreateHook(ctx, f.name, receiver.URL+path, string(hookSecret)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	commits := f.taggedCommits("hooked", 1)
	waitFor(t, 20*time.Second, "a run for the tag pushed to Gitea", func() bool {
		runs := f.listRuns(t)
		return len(runs) == 1 && runs[0].Spec.Commit == commits["run/hooked-00"]
	})
	repo := &taugridv1.TauRepository{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f.repo), repo); err != nil {
		t.Fatal(err)
	}
	if repo.Annotations[taugridv1.AnnotationNudge] == "" {
		t.Error("the run came without a nudge from the webhook")
	}
	t.Logf("tag pushed to Gitea -> TauRun through its webhook: %s", time.Since(start).Round(time.Millisecond))
}
