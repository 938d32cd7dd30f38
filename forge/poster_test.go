package forge_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	token = "s3cr3t-forge-token-value"
	sha   = "0123456789abcdef0123456789abcdef01234567"
)

var now = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

func newPoster(t *testing.T, typ forge.Type, tok string, m *forge.Metrics) (forge.StatusPoster, *forgetest.Server) {
	t.Helper()
	srv := forgetest.New(typ, token)
	t.Cleanup(srv.Close)
	p, err := forge.New(forge.Config{Type: typ, APIURL: srv.URL, Token: tok, Metrics: m,
		Clock: clocktesting.NewFakePassiveClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	return p, srv
}

func status(state forge.State) forge.Status {
	return forge.Status{Owner: "team-a", Repo: "research", SHA: sha, Context: "tau/default r1", State: state,
		Description: "queued in runs: waiting for 1 nvidia.com/gpu", TargetURL: "https://tau.example/runs/r1"}
}

func TestEachForgeReceivesStatesInItsOwnVocabulary(t *testing.T) {
	states := []forge.State{forge.StatePending, forge.StateRunning, forge.StateSuccess, forge.StateFailure, forge.StateError}
	want := map[forge.Type][]string{
		forge.GitHub: {"pending", "pending", "success", "failure", "error"},
		forge.Gitea:  {"pending", "pending", "success", "failure", "error"},
		forge.GitLab: {"pending", "running", "success", "failed", "canceled"},
	}
	for typ, wantStates := range want {
		t.Run(string(typ), func(t *testing.T) {
			p, srv := newPoster(t, typ, token, nil)
			for _, s := range states {
				if _, err := p.Post(context.Background(), status(s)); err != nil {
					t.Fatalf("posting %s: %v", s, err)
				}
			}
			var got []string
			for _, c := range srv.Accepted() {
				got = append(got, c.State)
				if c.Owner != "team-a" || c.Repo != "research" || c.SHA != sha || c.Context != "tau/default r1" ||
					c.TargetURL != "https://tau.example/runs/r1" {
					t.Errorf("call = %+v, want team-a/research at %s, context tau/default r1", c, sha)
				}
			}
			if diff := cmp.Diff(wantStates, got); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGitLabProjectPathsWithSubgroupsAreOneEncodedSegment(t *testing.T) {
	p, srv := newPoster(t, forge.GitLab, token, nil)
	s := status(forge.StateRunning)
	s.Owner = "ml/vision"
	if _, err := p.Post(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if c := srv.Accepted(); len(c) != 1 || c[0].Owner != "ml/vision" {
		t.Errorf("calls = %+v, want one to project ml/vision/research", c)
	}
}

func TestDescriptionsAreCutToTheForgeLimit(t *testing.T) {
	p, srv := newPoster(t, forge.GitHub, token, nil)
	s := status(forge.StateFailure)
	s.Description = strings.Repeat("tau.yaml:12:5: compute.gpus: ", 20)
	if _, err := p.Post(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if d := srv.Accepted()[0].Description; len([]rune(d)) != forge.MaxDescription || !strings.HasSuffix(d, "…") {
		t.Errorf("description %q has %d characters, want %d ending in …", d, len([]rune(d)), forge.MaxDescription)
	}
}

func TestForgeFailuresAreClassified(t *testing.T) {
	reset := strconv.FormatInt(now.Add(90*time.Second).Unix(), 10)
	cases := map[string]struct {
		fail     forgetest.Failure
		badToken bool
		wait     time.Duration // > 0: a WaitError of this duration
		terminal bool
	}{
		"a 500 is transient":                           {fail: forgetest.Failure{Code: 500, Body: "boom"}},
		"a 502 is transient":                           {fail: forgetest.Failure{Code: 502}},
		"a 403 with the quota spent waits for reset":   {fail: forgetest.Failure{Code: 403, Header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, Body: "API rate limit exceeded"}, wait: 90 * time.Second},
		"a 429 with Retry-After waits as told":         {fail: forgetest.Failure{Code: 429, Header: map[string]string{"Retry-After": "30"}}, wait: 30 * time.Second},
		"a 429 without headers waits a minute":         {fail: forgetest.Failure{Code: 429}, wait: time.Minute},
		"GitLab's RateLimit headers are read":          {fail: forgetest.Failure{Code: 429, Header: map[string]string{"RateLimit-Remaining": "0", "RateLimit-Reset": reset}}, wait: 90 * time.Second},
		"a 422 at the status cap is terminal":          {fail: forgetest.Failure{Code: 422, Body: "This SHA and context has reached the maximum number of statuses."}, terminal: true},
		"a GitHub secondary limit waits a minute":      {fail: forgetest.Failure{Code: 403, Body: "You have exceeded a secondary rate limit", Header: map[string]string{"Retry-After": "60"}}, wait: time.Minute},
		"a 403 without rate-limit headers is terminal": {fail: forgetest.Failure{Code: 403, Body: "Resource not accessible by integration"}, terminal: true},
		"a wrong token is terminal":                    {badToken: true, terminal: true},
	}
	for _, typ := range []forge.Type{forge.GitHub, forge.Gitea, forge.GitLab} {
		for name, tc := range cases {
			t.Run(string(typ)+"/"+name, func(t *testing.T) {
				tok := token
				if tc.badToken {
					tok = "wrong-" + token
				}
				p, srv := newPoster(t, typ, tok, nil)
				srv.FailNext(1, tc.fail)
				_, err := p.Post(context.Background(), status(forge.StatePending))
				if err == nil {
					t.Fatal("Post succeeded, want an error")
				}
				if strings.Contains(err.Error(), token) {
					t.Errorf("error %q contains the token", err)
				}
				wait, ok := forge.RetryAfter(err)
				if ok != (tc.wait > 0) || wait != tc.wait {
					t.Errorf("RetryAfter(%v) = %v, %v; want %v", err, wait, ok, tc.wait)
				}
				if got := forge.IsTerminal(err); got != tc.terminal {
					t.Errorf("IsTerminal(%v) = %v, want %v", err, got, tc.terminal)
				}
			})
		}
	}
}

func TestCallsAreCountedByForgeAndResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := forge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	p, srv := newPoster(t, forge.Gitea, token, m)
	srv.FailNext(1, forgetest.Failure{Code: 500})
	srv.FailNext(1, forgetest.Failure{Code: 429, Header: map[string]string{"Retry-After": "5"}})
	for range 3 {
		_, _ = p.Post(context.Background(), status(forge.StateRunning))
	}
	want := `
# HELP taugrid_forge_status_calls_total Commit status API calls by forge and result (ok, rate_limited, rejected, error).
# TYPE taugrid_forge_status_calls_total counter
taugrid_forge_status_calls_total{forge="gitea",result="error"} 1
taugrid_forge_status_calls_total{forge="gitea",result="ok"} 1
taugrid_forge_status_calls_total{forge="gitea",result="rate_limited"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestAnUnreachableForgeIsATransientErrorWithoutTheURL(t *testing.T) {
	srv := forgetest.New(forge.GitLab, token)
	srv.Close()
	p, err := forge.New(forge.Config{Type: forge.GitLab, APIURL: srv.URL, Token: token, HTTPClient: &http.Client{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Post(context.Background(), status(forge.StatePending))
	var ae *forge.APIError
	if err == nil || forge.IsTerminal(err) || errors.As(err, &ae) || strings.Contains(err.Error(), srv.URL) {
		t.Errorf("Post to a closed server = %v, want a transient error without the URL", err)
	}
}

func TestParseRepoURL(t *testing.T) {
	cases := map[string]struct{ owner, repo, root string }{
		"https://github.com/org/repo.git":           {"org", "repo", "https://github.com"},
		"https://gitlab.example/ml/vision/repo":     {"ml/vision", "repo", "https://gitlab.example"},
		"http://127.0.0.1:3000/team-a/research/":    {"team-a", "research", "http://127.0.0.1:3000"},
		"git@github.com:org/repo.git":               {"org", "repo", "https://github.com"},
		"ssh://git@gitea.example:2222/org/repo.git": {"org", "repo", "https://gitea.example"},
	}
	for in, want := range cases {
		owner, repo, root, err := forge.ParseRepoURL(in)
		if err != nil || owner != want.owner || repo != want.repo || root != want.root {
			t.Errorf("ParseRepoURL(%q) = %q, %q, %q, %v; want %q, %q, %q", in, owner, repo, root, err, want.owner, want.repo, want.root)
		}
	}
	for _, bad := range []string{"https://github.com/repo", "not a url", "https:///org/repo"} {
		if _, _, _, err := forge.ParseRepoURL(bad); err == nil {
			t.Errorf("ParseRepoURL(%q) succeeded, want an error", bad)
		}
	}
}
