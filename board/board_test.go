package board_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/board"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/browser"
	"github.com/taugrid/taugrid/test/controlplane"
)

const (
	system = "taugrid-system"
	tokenA = "token-of-team-a-0123456789"
	tokenB = "token-of-team-b-9876543210"
	// tokenP is the platform team's: it reads every team's board.
	tokenP = "token-of-the-platform-team-5555"
)

// world is a real API server holding two teams' runs, queues and tokens,
// and the controller's runs API with the board in front of it.
type world struct {
	c     client.Client
	clk   *clocktesting.FakeClock
	url   string
	start time.Time
}

func newWorld(t *testing.T) *world {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real API server; run without -short")
	}
	kueueCRDs, err := controlplane.KueueCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	env := controlplane.ForTest(t, controlplane.Options{CRDDirectoryPaths: []string{"../api/crds", kueueCRDs}})
	// The board's clock starts where the runs' times do: any date works.
	now := time.Now().UTC().Truncate(time.Second)
	s := controlplane.NewScheme()
	if err := taugridv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{c: c, clk: clocktesting.NewFakeClock(now), start: now}
	for _, ns := range []string{system, "team-a", "team-b"} {
		w.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for ns, tok := range map[string]string{"team-a": tokenA, "team-b": tokenB, taugridv1.APIPlatformAdmin: tokenP} {
		name := ns + "-api"
		if ns == taugridv1.APIPlatformAdmin {
			name = "platform-api"
		}
		w.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: system, Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{taugridv1.APITokenKey: []byte(tok), taugridv1.APINamespaceKey: []byte(ns)}})
	}
	w.queues(t)
	w.runs(t)
	api := &server.RunsAPI{Client: c, Clock: w.clk, Tokens: &server.Tokens{Reader: c, Namespace: system, Clock: w.clk},
		Board: &board.Handler{Client: c, Clock: w.clk}}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func (w *world) create(t *testing.T, o client.Object) {
	t.Helper()
	if err := w.c.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// queues: team A's LocalQueue on a ClusterQueue of 8 H200s that may
// borrow 4 more from its cohort, 8 in use now.
func (w *world) queues(t *testing.T) {
	t.Helper()
	w.create(t, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"}})
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: kueue.ClusterQueueSpec{
		CohortName: "research", NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{board.GPU},
			Flavors: []kueue.FlavorQuotas{{Name: "h200", Resources: []kueue.ResourceQuota{{Name: board.GPU,
				NominalQuota: resource.MustParse("8"), BorrowingLimit: ptr.To(resource.MustParse("4"))}}}}}}}}
	w.create(t, cq)
	cq.Status.FlavorsReservation = []kueue.FlavorUsage{{Name: "h200", Resources: []kueue.ResourceUsage{{Name: board.GPU, Total: resource.MustParse("8")}}}}
	if err := w.c.Status().Update(context.Background(), cq); err != nil {
		t.Fatal(err)
	}
	w.create(t, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "runs", Namespace: "team-a"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "team-a"}})
}

// run is one run to create: its phase, its GPUs and time limit (a
// Workload and a Job), when it entered its phases, its message.
type run struct {
	name, phase, who, message string
	gpus                      int64
	limit                     time.Duration
	admittedAgo               time.Duration
	position                  int32
	usage                     *taugridv1.GPUUsage
	ranFor                    time.Duration // an ended run's one attempt, from ranAgo
	ranAgo                    time.Duration
	progress                  int32 // percent done, reported just now
}

func (w *world) runs(t *testing.T) {
	t.Helper()
	idleSince := metav1.NewTime(w.start.Add(-25 * time.Minute))
	for _, r := range []run{
		{name: "r-pending", phase: "Pending", who: "alice@example.com", message: "rendering the run"},
		{name: "r-running-a", phase: "Running", who: "alice@example.com", gpus: 4, limit: time.Hour, admittedAgo: 35 * time.Minute,
			usage: &taugridv1.GPUUsage{GPUs: 4, Summary: "4 GPUs, 2% busy", Idle: true, IdleSince: &idleSince}},
		{name: "r-admitted-b", phase: "Admitted", who: "bob@example.com", gpus: 4, limit: 2 * time.Hour, admittedAgo: 20 * time.Minute, progress: 50},
		{name: "r-queued-1", phase: "Queued", who: "bob@example.com", gpus: 4, limit: time.Hour, position: 1,
			message: "waiting for quota: 4 nvidia.com/gpu more needed in flavor h200"},
		{name: "r-queued-2", phase: "Queued", who: "carol@example.com", gpus: 8, limit: 30 * time.Minute, position: 2,
			message: "waiting for quota: 8 nvidia.com/gpu more needed in flavor h200"},
		{name: "r-queued-huge", phase: "Queued", who: "carol@example.com", gpus: 16, limit: time.Hour, position: 3,
			message: "waiting for quota: 16 nvidia.com/gpu more needed in flavor h200"},
		{name: "r-succeeded", phase: "Succeeded", who: "alice@example.com", message: "exited 0", ranFor: 3 * time.Hour, ranAgo: 26 * time.Hour,
			usage: &taugridv1.GPUUsage{GPUs: 8, Summary: "8 GPUs, 91% busy"}},
		{name: "r-failed", phase: "Failed", who: "bob@example.com", message: "exited 1: CUDA out of memory", ranFor: 30 * time.Minute, ranAgo: 2 * time.Hour,
			usage: &taugridv1.GPUUsage{GPUs: 2, Summary: "2 GPUs"}},
		{name: "r-cancelled", phase: "Cancelled", who: "carol@example.com", message: "its run ref was deleted"},
	} {
		w.run(t, "team-a", r)
	}
	w.run(t, "team-b", run{name: "r-secret-b", phase: "Running", who: "mallory@b.example", message: "training project-nightingale"})
}

func (w *world) run(t *testing.T, ns string, r run) {
	t.Helper()
	ctx := context.Background()
	tr := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: ns},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: strings.Repeat("c", 40), Target: "train",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: taugridv1.RunRefPrefix + r.name, Requester: r.who}}}
	w.create(t, tr)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(w.start.Add(-ago)) }
	st := taugridv1.TauRunStatus{Phase: taugridv1.RunPhase(r.phase), Message: r.message,
		EvidenceURL: "https://tau.example/runs/" + ns + "/" + r.name}
	st.Phases = []taugridv1.PhaseTransition{{Phase: taugridv1.PhasePending, Time: at(r.admittedAgo + r.ranAgo + r.ranFor + time.Minute)}}
	if r.gpus > 0 {
		job := r.name + "-1"
		podSpec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "trainer",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{board.GPU: *resource.NewQuantity(r.gpus, resource.DecimalSI)}}}}}
		w.create(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: ns}, Spec: batchv1.JobSpec{Suspend: ptr.To(true),
			ActiveDeadlineSeconds: ptr.To(int64(r.limit.Seconds())), Template: corev1.PodTemplateSpec{Spec: podSpec}}})
		w.create(t, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-" + job, Namespace: ns}, Spec: kueue.WorkloadSpec{QueueName: "runs",
			PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: podSpec}}}}})
		st.Workload = &taugridv1.WorkloadStatus{Kind: "Job", Name: job, Workload: "job-" + job, Queue: "runs", Admitted: r.phase != "Queued"}
		if r.position > 0 {
			st.Workload.Position = ptr.To(r.position)
		}
		if r.admittedAgo > 0 {
			st.Phases = append(st.Phases, taugridv1.PhaseTransition{Phase: taugridv1.PhaseAdmitted, Time: at(r.admittedAgo)})
			st.Attempts = []taugridv1.Attempt{{Number: 1, Workload: "job-" + job, StartTime: ptr.To(at(r.admittedAgo)), GPUUsage: r.usage}}
			if r.progress > 0 {
				st.Progress = &taugridv1.RunProgress{Attempt: 1, Percent: r.progress, Time: at(0)}
			}
		}
	}
	if r.ranFor > 0 {
		st.Attempts = []taugridv1.Attempt{{Number: 1, Workload: r.name + "-1", StartTime: ptr.To(at(r.ranAgo + r.ranFor)), EndTime: ptr.To(at(r.ranAgo)), GPUUsage: r.usage}}
		st.Phases = append(st.Phases, taugridv1.PhaseTransition{Phase: taugridv1.RunPhase(r.phase), Time: at(r.ranAgo)})
	}
	for i := range st.Attempts {
		if u := st.Attempts[i].GPUUsage; u != nil {
			u.ReadAt = metav1.NewTime(w.start.Add(-time.Minute))
		}
	}
	tr.Status = st
	if err := w.c.Status().Update(ctx, tr); err != nil {
		t.Fatalf("status of %s: %v", r.name, err)
	}
}

// signedIn is a proxy in front of the board that signs every request in
// with token, for Chromium: its command line cannot post the sign-in form
// (the sessions are TestATeamsSessionReadsItsOwnBoardAndNoOther's).
func (w *world) signedIn(t *testing.T, token string) *httptest.Server {
	t.Helper()
	target, _ := url.Parse(w.url)
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = target.Host
		r.Out.Header.Set("Authorization", "Bearer "+token)
	}})
	t.Cleanup(proxy.Close)
	return proxy
}

// client is a browser's cookie jar against the board.
func (w *world) browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (w *world) login(t *testing.T, c *http.Client, token, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.url+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func get(t *testing.T, c *http.Client, u string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// A team signs in with its token and reads its own board; from the
// attacker's side, team A's session reads nothing of team B's, by the
// board's URL or the JSON API, and a session ends with its token.
func TestATeamsSessionReadsItsOwnBoardAndNoOther(t *testing.T) {
	w := newWorld(t)
	c := w.browser(t)

	if code, _, h := get(t, c, w.url+"/teams/team-a"); code != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Fatalf("the board without a sign-in: %d to %q, want a redirect to /login", code, h.Get("Location"))
	}
	resp := w.login(t, c, "not-a-token", w.url)
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "not a team&#39;s API token") {
		t.Errorf("a wrong token: %d %s", resp.StatusCode, body)
	}
	evil := w.login(t, c, tokenA, "https://evil.example")
	defer evil.Body.Close()
	if evil.StatusCode != http.StatusForbidden {
		t.Errorf("a sign-in posted from another site: %d, want 403", evil.StatusCode)
	}
	resp = w.login(t, c, tokenA, w.url)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/teams/team-a" {
		t.Fatalf("signing in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "Secure", "SameSite=Strict"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("the session cookie lacks %s: %s", want, cookie)
		}
	}
	if strings.Contains(cookie, tokenA) {
		t.Error("the session cookie holds the token itself")
	}
	u, _ := url.Parse(w.url)
	jarCookies := c.Jar.Cookies(&url.URL{Scheme: "https", Host: u.Host}) // Secure: the jar keeps it for https
	if len(jarCookies) != 1 {
		t.Fatalf("the browser holds %d cookies", len(jarCookies))
	}
	session := "tau_board=" + jarCookies[0].Value

	code, body, _ := get(t, c, w.url+"/teams/team-a", "Cookie", session)
	if code != http.StatusOK || !strings.Contains(body, "r-queued-1") {
		t.Fatalf("team A's board: %d\n%.300s", code, body)
	}
	// Team B's board, by URL, with team A's session or token: refused,
	// naming nothing of team B.
	for name, h := range map[string][]string{"team A's session": {"Cookie", session}, "team A's token": {"Authorization", "Bearer " + tokenA}} {
		code, body, _ := get(t, c, w.url+"/teams/team-b", h...)
		if code != http.StatusForbidden || strings.Contains(body, "r-secret-b") || strings.Contains(body, "nightingale") || strings.Contains(body, "mallory") {
			t.Errorf("team B's board with %s: %d\n%s", name, code, body)
		}
		code, body, _ = get(t, c, w.url+"/api/v1/namespaces/team-b/runs", h...)
		if code < 400 || strings.Contains(body, "r-secret-b") {
			t.Errorf("team B's runs as JSON with %s: %d\n%s", name, code, body)
		}
	}
	// The same queue as JSON, for scripts and tau queue.
	code, body, _ = get(t, c, w.url+"/api/v1/namespaces/team-a/queue", "Authorization", "Bearer "+tokenA)
	if code != http.StatusOK || !strings.Contains(body, `"start": "starts in about 20 min"`) || !strings.Contains(body, `"gpus": 16`) {
		t.Errorf("team A's queue as JSON: %d\n%s", code, body)
	}
	// The JSON API takes tokens, never the board's cookie: a page of
	// another site cannot read it with the browser's session.
	if code, _, _ := get(t, c, w.url+"/api/v1/namespaces/team-a/runs", "Cookie", session); code != http.StatusUnauthorized {
		t.Errorf("the JSON API with the board's cookie: %d, want 401", code)
	}
	// A deleted token ends its sessions, once the tokens are read again.
	if err := w.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-a-api", Namespace: system}}); err != nil {
		t.Fatal(err)
	}
	w.clk.Step(11 * time.Second)
	if code, _, h := get(t, c, w.url+"/teams/team-a", "Cookie", session); code != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Errorf("a session whose token was deleted: %d to %q, want a redirect to /login", code, h.Get("Location"))
	}
}

// The board, read in the real Chromium with runs in every phase: the
// queue in Kueue's order with each waiting run's estimated start, the
// quota, the GPU-hours, the idle GPUs and the runs, with no console error.
func TestTheBoardShowsTheQueueQuotaAndGPUHoursInABrowser(t *testing.T) {
	bin := browser.Chromium(t)
	w := newWorld(t)
	proxy := w.signedIn(t, tokenA)

	dom, console := browser.Browse(t, bin, "--dump-dom", proxy.URL+"/teams/team-a")
	page := string(dom)
	if len(console) > 0 {
		t.Errorf("the board wrote to the console: %q", console)
	}
	// r-running-a ends in 25 min (1 h limit, 35 min run) and r-admitted-b,
	// half done after 20 min of its 2 h limit, in 20: r-queued-1 takes
	// r-admitted-b's 4 GPUs at 20 min; r-queued-2 needs 8 of at most 12,
	// free once r-queued-1 ends at 80 min.
	for _, want := range []string{
		">team-a<", "Queued: 3", "Running: 1", "Succeeded: 1", "50% done",
		"r-queued-1", "starts in about 20 min", "starts in about 1 h 20 min",
		"will not start: it needs 16 GPUs and its queue's quota holds at most 12",
		"waiting for quota: 4 nvidia.com/gpu more needed in flavor h200",
		"8 of 8 GPUs in use", "may borrow 4",
		"alice@example.com", "GPU-hours this week",
		"exited 1: CUDA out of memory", "https://tau.example/runs/team-a/r-succeeded",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the board lacks %q", want)
		}
	}
	for _, never := range []string{"r-secret-b", "team-b", "nightingale", "mallory"} {
		if strings.Contains(page, never) {
			t.Errorf("team A's board names %q, of team B", never)
		}
	}
	if !strings.Contains(page, `id="idle"`) || !strings.Contains(page, "r-running-a") {
		t.Error("the board does not list r-running-a's idle GPUs")
	}
	// Alice: r-succeeded's 8 GPUs for 3 h ended 26 h ago (24 GPU-hours),
	// r-running-a's 4 GPUs for 35 min so far (2.3); Bob: r-failed's 2 GPUs
	// for 30 min (1.0).
	if !strings.Contains(page, "26.3") || !strings.Contains(page, ">1.0<") {
		t.Errorf("the week's GPU-hours are not 26.3 for alice and 1.0 for bob:\n%s", between(page, `id="usage"`, `id="idle"`))
	}
	if !strings.Contains(page, "<td>3h1m0s</td>") {
		t.Errorf("r-succeeded's 3 h run (a minute pending) is not shown as 3h1m0s:\n%s", between(page, "r-succeeded</a>", "</tr>"))
	}
	// Filtering: Bob's runs only.
	dom, _ = browser.Browse(t, bin, "--dump-dom", proxy.URL+"/teams/team-a?person=bob%40example.com")
	rows := between(string(dom), `id="runs-h"`, "</section>")
	if strings.Contains(rows, "<td>alice@example.com</td>") || strings.Count(rows, `class="run-row"`) != 3 || !strings.Contains(rows, "3 runs") {
		t.Errorf("the runs filtered to bob:\n%s", rows)
	}
	browser.Screenshot(t, bin, proxy.URL+"/teams/team-a", "board.png")
}

// The platform team's token reads /platform (every team's line, the
// quota, the GPU-hours by team, the idle GPUs) and any team's board; a
// team's session or token reads no /platform, and a malformed namespace
// gets a 400, not a list.
func TestThePlatformTeamReadsEveryTeamAndATeamDoesNot(t *testing.T) {
	bin := browser.Chromium(t)
	w := newWorld(t)
	c := w.browser(t)
	resp := w.login(t, c, tokenP, w.url)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/platform" {
		t.Fatalf("the platform team signing in: %d to %q, want /platform", resp.StatusCode, resp.Header.Get("Location"))
	}
	for name, h := range map[string][]string{"team A's token": {"Authorization", "Bearer " + tokenA}, "team B's token": {"Authorization", "Bearer " + tokenB}} {
		code, body, _ := get(t, c, w.url+"/platform", h...)
		if code != http.StatusForbidden || strings.Contains(body, "team-b") && name == "team A's token" || strings.Contains(body, "r-secret-b") {
			t.Errorf("/platform with %s: %d\n%s", name, code, body)
		}
	}
	if code, body, _ := get(t, c, w.url+"/platform", "Authorization", "Bearer not-a-token"); code != http.StatusUnauthorized || strings.Contains(body, "/teams/") {
		t.Errorf("/platform with a token that is no team's: %d\n%s", code, body)
	}
	if code, _, h := get(t, w.browser(t), w.url+"/platform"); code != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Errorf("/platform without a sign-in: %d to %q", code, h.Get("Location"))
	}
	admin := []string{"Authorization", "Bearer " + tokenP}
	if code, body, _ := get(t, c, w.url+"/teams/team-b", admin...); code != http.StatusOK || !strings.Contains(body, "r-secret-b") {
		t.Errorf("team B's board for the platform team: %d\n%.300s", code, body)
	}
	if code, body, _ := get(t, c, w.url+"/api/v1/namespaces/team-b/runs", admin...); code != http.StatusOK || !strings.Contains(body, "r-secret-b") {
		t.Errorf("team B's runs as JSON for the platform team: %d\n%.300s", code, body)
	}
	if code, _, _ := get(t, c, w.url+"/api/v1/namespaces/Team_B/runs", admin...); code != http.StatusBadRequest {
		t.Errorf("a malformed namespace for the platform team: %d, want 400", code)
	}

	proxy := w.signedIn(t, tokenP)
	dom, console := browser.Browse(t, bin, "--dump-dom", proxy.URL+"/platform")
	page := string(dom)
	if len(console) > 0 {
		t.Errorf("the platform board wrote to the console: %q", console)
	}
	// Team A: r-pending and three queued runs wait, r-running-a and
	// r-admitted-b hold quota (4 GPUs read, all idle), three ended, one
	// failed; 26.3 GPU-hours this week. Team B: one running run.
	teamA := between(page, `<a href="/teams/team-a">`, "</tr>")
	for _, want := range []string{`<td class="num">4</td><td class="num">2</td><td class="num">4</td>`, `<td class="num">4</td><td class="num">3</td><td class="num">1</td><td class="num">27.3</td>`} {
		if !strings.Contains(teamA, want) {
			t.Errorf("team A's line lacks %s:\n%s", want, teamA)
		}
	}
	for _, want := range []string{`href="/teams/team-b"`, "8 of 8 GPUs in use", "GPU-hours by team", "https://tau.example/runs/team-a/r-running-a"} {
		if !strings.Contains(page, want) {
			t.Errorf("the platform board lacks %q", want)
		}
	}
	browser.Screenshot(t, bin, proxy.URL+"/platform", "platform.png")
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}
