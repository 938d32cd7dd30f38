package integration

import (
	"cmp"
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
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
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
func sharedGitea(t testing.TB) *controlplane.Gitea {
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

func newGiteaFixture(t testing.TB, prefix string) *giteaFixture {
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

// taggedCommit makes one commit, tagged run/<prefix>-00, pushes it and
// returns it.
func (f *giteaFixture) taggedCommit(prefix string) string {
	return f.taggedCommits(prefix, 1)["run/"+prefix+"-00"]
}

// statuses lists what Gitea holds for a run's context on its commit.
func (f *giteaFixture) statuses(t testing.TB, run *taugridv1.TauRun) []controlplane.GiteaStatus {
	t.Helper()
	all, err := f.gitea.CommitStatuses(context.Background(), f.name, run.Spec.Commit)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := forge.Desired(run).Context
	return slices.DeleteFunc(all, func(s controlplane.GiteaStatus) bool { return s.Context != ctxName })
}

// showSuccess: every run's commit shows its success last.
func (f *giteaFixture) showSuccess(t testing.TB, runs []taugridv1.TauRun) bool {
	for i := range runs {
		if st := f.statuses(t, &runs[i]); len(st) == 0 || st[len(st)-1].State != "success" {
			return false
		}
	}
	return true
}

// completeAdmittedJobs completes every Job Kueue admitted (unsuspended),
// as the Job controller would once its pod exits 0.
func (f *giteaFixture) completeAdmittedJobs(t *testing.T) {
	t.Helper()
	for _, j := range f.jobs(t) {
		if j.Spec.Suspend != nil && *j.Spec.Suspend || jobDone(&j) {
			continue
		}
		// The controller may delete a Job after the list: a restarted one
		// finds an attempt it never recorded and makes it again.
		if err := updateJobStatus(f.ns, j.Name, completed); client.IgnoreNotFound(err) != nil {
			t.Fatalf("completing Job %s: %v", j.Name, err)
		}
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
	if err := m.nudger.NudgeRepository(context.Background(), f.repo.Namespace, f.repo.Name, 0); err != nil {
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
	waitFor(t, 30*time.Second, "every commit to show success", func() bool { return f.showSuccess(t, runs) })
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

// phaseOrder is the order a run's phases, and so their statuses, come in.
var phaseOrder = []taugridv1.RunPhase{taugridv1.PhasePending, taugridv1.PhaseQueued, taugridv1.PhaseAdmitted,
	taugridv1.PhaseRunning, taugridv1.PhaseSucceeded}

// phaseOf is the phase a status's description shows, or "" for none.
func phaseOf(description string) taugridv1.RunPhase {
	for _, p := range phaseOrder {
		if strings.HasPrefix(description, phasePrefix[p]) {
			return p
		}
	}
	return ""
}

// queuedExplanation is how the waiter's explanation begins when it is the
// only run waiting.
const queuedExplanation = "queued #1 of 1"

// follower polls, every 20 ms until closed, the run on one commit and
// that run's statuses on the commit, recording when it first saw the run
// in each phase and each description on the commit. A status seen before
// its phase counts the phase as seen then, so a latency is never
// negative; the resolution is one poll and its two round trips.
type follower struct {
	f      *giteaFixture
	commit string
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	run    *taugridv1.TauRun // as last seen
	phase  map[taugridv1.RunPhase]time.Time
	posted map[string]time.Time // by description
	err    error
}

// follow starts following the run that will be on commit.
func (f *giteaFixture) follow(commit string) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	fl := &follower{f: f, commit: commit, cancel: cancel, done: make(chan struct{}),
		phase: map[taugridv1.RunPhase]time.Time{}, posted: map[string]time.Time{}}
	go func() {
		defer close(fl.done)
		for ctx.Err() == nil {
			fl.poll(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return fl
}

// close stops the polls; what was seen stays readable.
func (fl *follower) close() {
	fl.cancel()
	<-fl.done
}

func (fl *follower) poll(ctx context.Context) {
	var list taugridv1.TauRunList
	err := k8s.List(ctx, &list, client.InNamespace(fl.f.ns))
	runSeen := time.Now()
	var run *taugridv1.TauRun
	for i := range list.Items {
		if list.Items[i].Spec.Commit == fl.commit {
			run = &list.Items[i]
		}
	}
	var st []controlplane.GiteaStatus
	if err == nil && run != nil {
		st, err = fl.f.gitea.CommitStatuses(ctx, fl.f.name, fl.commit)
	}
	postSeen := time.Now()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		fl.err = err
	}
	if err != nil || run == nil {
		return
	}
	fl.run = run
	firstAt(fl.phase, run.Status.Phase, runSeen)
	ctxName := forge.Desired(run).Context
	for _, s := range st {
		if s.Context != ctxName {
			continue
		}
		firstAt(fl.posted, s.Description, postSeen)
		if p := phaseOf(s.Description); p != "" {
			firstAt(fl.phase, p, postSeen)
		}
	}
}

func firstAt[K comparable](m map[K]time.Time, k K, at time.Time) {
	if _, ok := m[k]; !ok {
		m[k] = at
	}
}

// waitUntil waits until cond, which runs with fl.mu held, holds of what
// the follower has seen; a poll that failed fails tb at once.
func (fl *follower) waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	waitFor(tb, time.Minute, what, func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if fl.err != nil {
			tb.Fatalf("following the run on %.12s: %v", fl.commit, fl.err)
		}
		return fl.run != nil && cond()
	})
}

// firstPost is when a description beginning with prefix was first seen
// on the commit, or zero. Callers hold fl.mu or have closed fl.
func (fl *follower) firstPost(prefix string) time.Time {
	var first time.Time
	for desc, at := range fl.posted {
		if strings.HasPrefix(desc, prefix) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// latency is the time from the run first seen in p to p's status first
// seen on the commit; false if either was not seen. For a closed fl.
func (fl *follower) latency(p taugridv1.RunPhase) (time.Duration, bool) {
	post, phase := fl.firstPost(phasePrefix[p]), fl.phase[p]
	return post.Sub(phase), !post.IsZero() && !phase.IsZero()
}

// nudge asks the manager to poll the fixture's repository now.
func (f *giteaFixture) nudge(tb testing.TB, m *runningManager) {
	tb.Helper()
	if err := m.nudger.NudgeRepository(context.Background(), f.repo.Namespace, f.repo.Name, 0); err != nil {
		tb.Fatal(err)
	}
}

// queueBehindABlocker is one round on a 1-GPU queue: a blocker tag is
// pushed and admitted, then a waiter tag behind it; once the waiter's
// explanation is on its commit the blocker completes, and once the waiter
// is admitted it completes too. It returns, once the waiter's success is
// on its commit, the (closed) follower that watched the waiter.
func (f *giteaFixture) queueBehindABlocker(tb testing.TB, m *runningManager, round int) *follower {
	tb.Helper()
	blocker := f.taggedCommit(fmt.Sprintf("blocker%d", round))
	f.nudge(tb, m)
	var job string
	seen := "no run yet"
	// Five minutes: under make test's load on two cores Kueue has taken
	// over two to make the blocker's Job a Workload (the run said
	// "waiting for Kueue to see the workload"). How long it took is
	// logged, so a slow pass shows.
	asked := time.Now()
	waitForSaying(tb, 5*time.Minute, "the blocker to be admitted", func() bool {
		for _, r := range f.listRuns(tb) {
			if r.Spec.Commit != blocker {
				continue
			}
			seen = fmt.Sprintf("run %s %s: %s", r.Name, r.Status.Phase, r.Status.Message)
			if r.Status.Phase == taugridv1.PhaseAdmitted {
				job = r.Status.Workload.Name
			}
		}
		return job != ""
	}, func() string { return seen + "; in the API server and Kueue's log:" + kueueView(f.ns) })
	tb.Logf("the blocker was admitted %s after its tag was pushed", time.Since(asked).Round(time.Second))
	fl := f.follow(f.taggedCommit(fmt.Sprintf("waiter%d", round)))
	defer fl.close()
	f.nudge(tb, m)
	fl.waitUntil(tb, "the waiter's explanation on its commit", func() bool { return !fl.firstPost(queuedExplanation).IsZero() })
	time.Sleep(time.Second) // queued for a while: nothing more to post
	completeJob(tb, f.ns, job)
	fl.waitUntil(tb, "the waiter to be admitted and shown so", func() bool {
		job = ""
		if w := fl.run.Status.Workload; w != nil && fl.run.Status.Phase == taugridv1.PhaseAdmitted {
			job = w.Name
		}
		return job != "" && !fl.firstPost(phasePrefix[taugridv1.PhaseAdmitted]).IsZero()
	})
	completeJob(tb, f.ns, job)
	fl.waitUntil(tb, "the waiter's success on its commit", func() bool {
		return !fl.firstPost(phasePrefix[taugridv1.PhaseSucceeded]).IsZero()
	})
	return fl
}

// measuredPhases are the phases whose statuses the Gitea test and
// benchmark follow to the commit.
var measuredPhases = []taugridv1.RunPhase{taugridv1.PhaseQueued, taugridv1.PhaseAdmitted, taugridv1.PhaseSucceeded}

// A run that queues behind another, then runs and succeeds: its queued,
// admitted and succeeded statuses each reach its commit once, in phase
// order, and the queued explanation is there before the run is admitted.
// How soon is BenchmarkPhaseReachesGitea's to measure.
func TestEachPhaseReachesGiteaInOrderOnce(t *testing.T) {
	f := newGiteaFixture(t, "fg2")
	setGPUQuota(t, f.ns, "1", "0")
	m := startManager(t)
	defer m.stop()
	fl := f.queueBehindABlocker(t, m, 0)
	time.Sleep(2 * time.Second) // a late duplicate would land by now
	st := f.statuses(t, fl.run)
	slices.SortFunc(st, func(a, b controlplane.GiteaStatus) int { return cmp.Compare(a.ID, b.ID) })
	var descs []string
	for _, s := range st {
		descs = append(descs, s.State+": "+s.Description)
	}
	if explained, admitted := fl.firstPost(queuedExplanation), fl.phase[taugridv1.PhaseAdmitted]; !explained.Before(admitted) {
		t.Errorf("the queued explanation was on the commit at %v, not before the run was admitted at %v", explained, admitted)
	}
	if !slices.ContainsFunc(st, func(s controlplane.GiteaStatus) bool { return strings.HasPrefix(s.Description, queuedExplanation) }) {
		t.Errorf("Gitea holds no %q status (all: %q)", queuedExplanation, descs)
	}
	for _, p := range measuredPhases {
		if !slices.ContainsFunc(st, func(s controlplane.GiteaStatus) bool { return phaseOf(s.Description) == p }) {
			t.Errorf("Gitea holds no %s status (all: %q)", p, descs)
		}
	}
	if out := outOfPhaseOrder(st); len(out) > 0 {
		t.Errorf("statuses out of phase order or showing no phase: %q (all: %q)", out, descs)
	}
	if twice := postedTwice(st); len(twice) > 0 {
		t.Errorf("posted more than once: %q (all: %q)", twice, descs)
	}
	var seen []string
	for _, p := range measuredPhases {
		d, _ := fl.latency(p)
		seen = append(seen, fmt.Sprintf("%s %s", p, d.Round(time.Millisecond)))
	}
	t.Logf("seen in the run -> seen on the commit (not asserted): %s; statuses: %q", strings.Join(seen, ", "), descs)
}

// outOfPhaseOrder names the statuses, in Gitea's order, that show no
// phase or an earlier phase than a status before them.
func outOfPhaseOrder(st []controlplane.GiteaStatus) []string {
	var out []string
	last := -1
	for _, s := range st {
		i := slices.Index(phaseOrder, phaseOf(s.Description))
		if i < 0 || i < last {
			out = append(out, s.State+": "+s.Description)
		}
		last = max(last, i)
	}
	return out
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
