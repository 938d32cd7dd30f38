package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/taugrid/taugrid/api/gpus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// The callers of the tests: the controller, Prometheus, a tenant's pod
// with its own ServiceAccount, and trustedToken, which the other tests of
// the package use to read /gpus and /metrics.
const (
	controllerToken    = "token-of-the-controller" // for the agents (gpus.Audience), as it reads /gpus
	controllerAPIToken = "token-of-the-controller-for-the-api-server"
	prometheusToken    = "token-of-prometheus"
	attackerToken      = "token-of-team-b-attacker" // for both: a pod may project its own for any audience
	trustedToken       = "token-of-a-trusted-test"

	controllerUser = "system:serviceaccount:taugrid-system:tau-controller"
	prometheusUser = "system:serviceaccount:monitoring:prometheus-k8s"
	attackerUser   = "system:serviceaccount:team-b:attacker"
)

// fakeCluster answers TokenReviews and SubjectAccessReviews as the API
// server would for its tokens and grants: a fake clientset with reactors.
type fakeCluster struct {
	*fake.Clientset
	tokens    map[string]string   // token -> user
	audiences map[string][]string // token -> its audiences (none: apiAudience)
	grants    map[string][]string // user -> non-resource paths it may get
	// ignoreAudiences answers as an API server that does not check a
	// review's audiences would: for the token's own.
	ignoreAudiences bool
	// gate, when set, holds every TokenReview until it is closed.
	gate chan struct{}
	// fail makes every review fail, as an API server that cannot be reached.
	fail atomic.Bool

	tokenReviews, accessReviews atomic.Int64
}

func newFakeCluster() *fakeCluster {
	c := &fakeCluster{Clientset: fake.NewClientset(),
		tokens: map[string]string{controllerToken: controllerUser, controllerAPIToken: controllerUser,
			prometheusToken: prometheusUser, attackerToken: attackerUser},
		audiences: map[string][]string{controllerToken: {gpus.Audience}, attackerToken: {apiAudience, gpus.Audience},
			trustedToken: {apiAudience, gpus.Audience}},
		grants: map[string][]string{controllerUser: {"/gpus"}, prometheusUser: {"/metrics"}},
	}
	c.PrependReactor("create", "tokenreviews", c.reviewToken)
	c.PrependReactor("create", "subjectaccessreviews", c.reviewAccess)
	return c
}

func (c *fakeCluster) reviewToken(a k8stesting.Action) (bool, runtime.Object, error) {
	c.tokenReviews.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if c.fail.Load() {
		return true, nil, errors.New("connection refused")
	}
	tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
	has := c.audiences[tr.Spec.Token]
	if len(has) == 0 {
		has = []string{apiAudience}
	}
	want := tr.Spec.Audiences
	if len(want) == 0 || c.ignoreAudiences {
		want = []string{apiAudience}
	}
	var both []string
	for _, aud := range want {
		if slices.Contains(has, aud) {
			both = append(both, aud)
		}
	}
	user, ok := c.tokens[tr.Spec.Token]
	if !ok || len(both) == 0 {
		tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		return true, tr, nil
	}
	ns := strings.Split(user, ":")[2]
	tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: both, User: authenticationv1.UserInfo{Username: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}}
	return true, tr, nil
}

// apiAudience is the fake API server's own audience.
const apiAudience = "https://kubernetes.default.svc"

func (c *fakeCluster) reviewAccess(a k8stesting.Action) (bool, runtime.Object, error) {
	c.accessReviews.Add(1)
	if c.fail.Load() {
		return true, nil, errors.New("connection refused")
	}
	sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
	nr := sar.Spec.NonResourceAttributes
	for _, p := range c.grants[sar.Spec.User] {
		if nr != nil && nr.Verb == "get" && nr.Path == p {
			sar.Status.Allowed = true
		}
	}
	return true, sar, nil
}

func (c *fakeCluster) reviews() [2]int64 {
	return [2]int64{c.tokenReviews.Load(), c.accessReviews.Load()}
}

// trustingGuard admits trustedToken to /gpus and /metrics.
func trustingGuard(t testing.TB) *Guard {
	t.Helper()
	c := newFakeCluster()
	c.tokens[trustedToken] = "system:serviceaccount:taugrid-system:tau-test"
	c.grants["system:serviceaccount:taugrid-system:tau-test"] = []string{"/gpus", "/metrics"}
	return NewGuard(c, DefaultGuardConfig(), nil, nil)
}

// guarded serves a page naming a tenant's pod behind a Guard on c, for
// tokens for the agents, as /gpus.
func guarded(t *testing.T, c *fakeCluster, cfg GuardConfig, clk *clocktesting.FakeClock) (*httptest.Server, *Guard) {
	t.Helper()
	g := NewGuard(c, cfg, clk, prometheus.NewRegistry())
	srv := httptest.NewServer(g.Require(gpus.Audience, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("team-a/r-1-0 holds GPU 0\n"))
	})))
	t.Cleanup(srv.Close)
	return srv, g
}

// TestStrangersReadNeitherTheGPUsNorTheMetrics is a tenant's pod on the
// node's network asking the real agent's /gpus and /metrics, which name
// the pods of every namespace holding its GPUs: without a token, with a
// made-up one, with its own ServiceAccount's, or with a token sent
// other than as a bearer token, it is refused and reads nothing; the
// controller reads /gpus and Prometheus /metrics, each only what RBAC
// grants it. Before the Guard, every one of these was answered 200.
func TestStrangersReadNeitherTheGPUsNorTheMetrics(t *testing.T) {
	f := newFakeNVML(t)
	k := newStandInKubelet(t)
	reg := prometheus.NewRegistry()
	a := newTestAgentWith(t, f, Deps{PodResources: dialKubelet(t, k), Registry: reg})
	k.setPods(gpuPod("team-a", "r-1-0", "main", "nvidia.com/gpu", f.uuid(0)))
	a.poll(context.Background(), false)
	c := newFakeCluster()
	srv := httptest.NewServer(a.Handler(reg, NewGuard(c, DefaultGuardConfig(), nil, nil)))
	t.Cleanup(srv.Close)

	cases := map[string]struct {
		path, header string
		code         int
		says         string
	}{
		"no token":          {path: "/gpus", code: 401, says: "/gpus needs a ServiceAccount token the cluster vouches for"},
		"no token, metrics": {path: "/metrics", code: 401, says: "/metrics needs a ServiceAccount token"},
		"a made-up token":   {path: "/gpus", header: "Bearer made-up", code: 401, says: "the cluster does not vouch for this token"},
		"the controller's token, not as a bearer": {path: "/gpus", header: "Basic " + controllerToken, code: 401, says: "send it as Authorization: Bearer"},
		"a tenant's own ServiceAccount":           {path: "/gpus", header: "Bearer " + attackerToken, code: 403, says: `"` + attackerUser + `" may not get /gpus`},
		"a tenant's own ServiceAccount, metrics":  {path: "/metrics", header: "Bearer " + attackerToken, code: 403, says: `"` + attackerUser + `" may not get /metrics`},
		"a tenant's ServiceAccount, narrowed":     {path: "/gpus?namespace=team-b", header: "Bearer " + attackerToken, code: 403, says: "may not get /gpus"},
		"Prometheus, on /gpus":                    {path: "/gpus", header: "Bearer " + prometheusToken, code: 401, says: "for audience " + gpus.Audience},
		"the controller's token for the API server, on /gpus": {path: "/gpus", header: "Bearer " + controllerAPIToken, code: 401,
			says: "/gpus needs a valid ServiceAccount token for audience " + gpus.Audience},
		"the controller's token for the agents, on /metrics":     {path: "/metrics", header: "Bearer " + controllerToken, code: 401, says: "does not vouch"},
		"the controller's token for the API server, on /metrics": {path: "/metrics", header: "Bearer " + controllerAPIToken, code: 403, says: "may not get /metrics"},
		"the controller, on /gpus":                               {path: "/gpus", header: "Bearer " + controllerToken, code: 200, says: `"pod":"r-1-0"`},
		"Prometheus, on /metrics":                                {path: "/metrics", header: "Bearer " + prometheusToken, code: 200, says: `pod="r-1-0"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, body := request(t, srv.URL+tc.path, tc.header)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Errorf("%d %q, want %d saying %q", code, body, tc.code, tc.says)
			}
			if tc.code != 200 && strings.Contains(body, "r-1-0") {
				t.Errorf("refused, yet the body names team-a's pod: %s", body)
			}
			for _, token := range []string{controllerToken, controllerAPIToken, prometheusToken, attackerToken, "made-up"} {
				if strings.Contains(body, token) {
					t.Errorf("the answer echoes a token: %s", body)
				}
			}
		})
	}
}

// TestATokenForTheAPIServerIsNotOneForTheAgents: an API server that
// answered a review for its own audience, not the one asked, does not
// make the controller's token for it good on /gpus.
func TestATokenForTheAPIServerIsNotOneForTheAgents(t *testing.T) {
	c := newFakeCluster()
	c.ignoreAudiences = true
	srv, _ := guarded(t, c, DefaultGuardConfig(), clocktesting.NewFakeClock(time.Date(2031, 5, 4, 10, 0, 0, 0, time.UTC)))
	code, body := request(t, srv.URL+"/gpus", "Bearer "+controllerAPIToken)
	if code != http.StatusUnauthorized || !strings.Contains(body, "did not vouch for this token for the agents") {
		t.Errorf("%d %q, want 401 saying the cluster did not vouch for it for the agents", code, body)
	}
	if strings.Contains(body, "r-1-0") {
		t.Errorf("refused, yet served: %s", body)
	}
}

// TestHealthzNeedsNoToken: the kubelet's probes carry no token.
func TestHealthzNeedsNoToken(t *testing.T) {
	a := newTestAgentWith(t, newFakeNVML(t), Deps{})
	srv := httptest.NewServer(a.Handler(prometheus.NewRegistry(), NewGuard(newFakeCluster(), DefaultGuardConfig(), nil, nil)))
	t.Cleanup(srv.Close)
	a.beat.Store(time.Now().UnixNano())
	if code, body := request(t, srv.URL+"/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz without a token: %d %s, want 200", code, body)
	}
}

// TestAnAnswerHoldsForItsTTL: a caller scraping again and again costs the
// API server one TokenReview and one SubjectAccessReview per AllowTTL, a
// refused one one pair per DenyTTL; an answer is for one path only.
func TestAnAnswerHoldsForItsTTL(t *testing.T) {
	c := newFakeCluster()
	clk := clocktesting.NewFakeClock(time.Date(2031, 5, 4, 10, 0, 0, 0, time.UTC))
	cfg := DefaultGuardConfig()
	srv, _ := guarded(t, c, cfg, clk)
	ask := func(path, token string, want int) {
		t.Helper()
		if code, body := request(t, srv.URL+path, "Bearer "+token); code != want {
			t.Fatalf("%s with %s: %d %s, want %d", path, token, code, body, want)
		}
	}
	steps := []struct {
		what    string
		do      func()
		reviews [2]int64 // TokenReviews, SubjectAccessReviews so far
	}{
		{"the controller, five times", func() {
			for range 5 {
				ask("/gpus", controllerToken, 200)
			}
		}, [2]int64{1, 1}},
		{"a tenant, five times", func() {
			for range 5 {
				ask("/gpus", attackerToken, 403)
			}
		}, [2]int64{2, 2}},
		{"a made-up token, five times", func() {
			for range 5 {
				ask("/gpus", "made-up", 401)
			}
		}, [2]int64{3, 2}},
		{"the controller on another path", func() { ask("/metrics", controllerToken, 403) }, [2]int64{4, 3}},
		{"the tenant after DenyTTL, the controller still cached", func() {
			clk.Step(cfg.DenyTTL)
			ask("/gpus", attackerToken, 403)
			ask("/gpus", controllerToken, 200)
		}, [2]int64{5, 4}},
		{"the controller after AllowTTL", func() {
			clk.Step(cfg.AllowTTL - cfg.DenyTTL)
			ask("/gpus", controllerToken, 200)
			ask("/gpus", controllerToken, 200)
		}, [2]int64{6, 5}},
	}
	for _, s := range steps {
		s.do()
		if diff := cmp.Diff(s.reviews, c.reviews()); diff != "" {
			t.Fatalf("after %s, reviews (-want +got):\n%s", s.what, diff)
		}
	}
}

// TestAFloodOfMadeUpTokensCostsTheAPIServerAtMostTheBound: a tenant sends
// hundreds of requests, each with a new random token, at once. The agent
// asks the API server about no more of them than its burst allows (the
// rest get 429), its caches stay within their caps, and the controller,
// whose admission lapses in the middle of the flood, still gets in.
func TestAFloodOfMadeUpTokensCostsTheAPIServerAtMostTheBound(t *testing.T) {
	c := newFakeCluster()
	clk := clocktesting.NewFakeClock(time.Date(2031, 5, 4, 10, 0, 0, 0, time.UTC))
	cfg := DefaultGuardConfig()
	cfg.DenyEntries = 5
	srv, g := guarded(t, c, cfg, clk)
	if code, _ := request(t, srv.URL+"/gpus", "Bearer "+controllerToken); code != 200 {
		t.Fatalf("the controller before the flood: %d", code)
	}
	flood := func(round int) map[int]int {
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for i := range 300 {
			wg.Go(func() {
				code, _ := request(t, srv.URL+"/gpus", fmt.Sprintf("Bearer random-%d-%d", round, i))
				mu.Lock()
				codes[code]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return codes
	}
	first := flood(1)
	if got := c.tokenReviews.Load(); got > int64(cfg.ReviewBurst) {
		t.Errorf("300 made-up tokens made %d TokenReviews, want at most the burst, %d", got, cfg.ReviewBurst)
	}
	if first[http.StatusUnauthorized]+first[http.StatusTooManyRequests] != 300 || first[http.StatusTooManyRequests] < 300-cfg.ReviewBurst {
		t.Errorf("answers to the flood by status %v, want at most %d 401s and the rest 429", first, cfg.ReviewBurst)
	}
	clk.Step(cfg.AllowTTL) // the limiter refills; the controller's admission lapses
	before := c.tokenReviews.Load()
	flood(2)
	if got := c.tokenReviews.Load() - before; got > int64(cfg.ReviewBurst) {
		t.Errorf("the second flood made %d TokenReviews, want at most %d", got, cfg.ReviewBurst)
	}
	if code, body := request(t, srv.URL+"/gpus", "Bearer "+controllerToken); code != 200 {
		t.Errorf("the controller, during the flood, once its admission lapsed: %d %s, want 200", code, body)
	}
	if n := g.denied.Len(); n > cfg.DenyEntries {
		t.Errorf("%d refused tokens cached, want at most %d", n, cfg.DenyEntries)
	}
	if strings.Contains(fmt.Sprint(g.denied), "random-") {
		t.Error("the cache holds a token itself")
	}
}

// TestReviewsUnderWayAreBounded: while the API server is slow, tokens not
// in the cache beyond MaxInFlight are answered 429 at once, not queued.
func TestReviewsUnderWayAreBounded(t *testing.T) {
	c := newFakeCluster()
	c.gate = make(chan struct{})
	cfg := DefaultGuardConfig()
	cfg.MaxInFlight = 2
	srv, g := guarded(t, c, cfg, clocktesting.NewFakeClock(time.Now()))
	release := sync.OnceFunc(func() { close(c.gate) })
	t.Cleanup(release) // before the server's Close, which waits for the held requests
	var wg sync.WaitGroup
	for i := range cfg.MaxInFlight {
		wg.Go(func() { request(t, srv.URL+"/gpus", fmt.Sprintf("Bearer slow-%d", i)) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(g.slots) < cfg.MaxInFlight {
		if time.Now().After(deadline) {
			t.Fatalf("%d reviews under way, want %d", len(g.slots), cfg.MaxInFlight)
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, body := request(t, srv.URL+"/gpus", "Bearer "+controllerToken)
	release()
	wg.Wait()
	if code != http.StatusTooManyRequests || !strings.Contains(body, "too many tokens to check at once") {
		t.Errorf("a third unknown token while two are reviewed: %d %q, want 429", code, body)
	}
	if got := c.tokenReviews.Load(); got != int64(cfg.MaxInFlight) {
		t.Errorf("%d TokenReviews, want %d", got, cfg.MaxInFlight)
	}
}

// TestAnAPIServerItCannotReachRefusesWithoutCaching: 503 while the reviews
// fail, and the next request after it heals is reviewed, not refused from
// a cache.
func TestAnAPIServerItCannotReachRefusesWithoutCaching(t *testing.T) {
	c := newFakeCluster()
	c.fail.Store(true)
	srv, _ := guarded(t, c, DefaultGuardConfig(), clocktesting.NewFakeClock(time.Now()))
	if code, body := request(t, srv.URL+"/gpus", "Bearer "+controllerToken); code != http.StatusServiceUnavailable || strings.Contains(body, "r-1-0") {
		t.Errorf("with the API server unreachable: %d %q, want 503 and nothing served", code, body)
	}
	c.fail.Store(false)
	if code, body := request(t, srv.URL+"/gpus", "Bearer "+controllerToken); code != http.StatusOK {
		t.Errorf("once it is back: %d %q, want 200", code, body)
	}
}

// request asks url with the Authorization header ("": none). It may be
// called from goroutines: it reports errors, never stops the test.
func request(t *testing.T, url, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req) // an answer held back fails the test, not hangs it
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return resp.StatusCode, string(b)
}
