package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The tokens of two teams, as their platform team issued them.
const (
	teamAToken = "team-a-token-value"
	teamBToken = "team-b-token-value"
)

// freshUser gives the test a user who never logged in: an empty config
// directory, no TAU_* variables, no kubeconfig, and a working directory
// outside any repository. It returns where tau login would store tokens.
func freshUser(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("AppData", filepath.Join(home, "AppData"))
	t.Setenv("TAU_API_URL", "")
	t.Setenv("TAU_TOKEN", "")
	t.Setenv("KUBECONFIG", filepath.Join(home, "no-kubeconfig"))
	t.Chdir(t.TempDir())
	path, err := credentialsPath()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// enterClone writes a repository whose committed .tau/config.yaml names
// apiURL, as a stranger's repository might, and enters it.
func enterClone(t *testing.T, apiURL string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".tau"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tau", "config.yaml"), []byte("api_url: "+apiURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
}

// newTeamAPI is the real runs API, on a fake client holding one run of
// team a and the tokens of teams a and b.
func newTeamAPI(t *testing.T) *httptest.Server {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	ref := RunRefPrefix + "r-20261130-101500-3f9a2c"
	commit := strings.Repeat("c", 40)
	tokenSecret := func(team, token string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: team + "-token", Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{taugridv1.APITokenKey: []byte(token), taugridv1.APINamespaceKey: []byte(team)}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		tokenSecret("team-a", teamAToken), tokenSecret("team-b", teamBToken),
		&taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: runs.RunName("research", ref, commit, "default"), Namespace: "team-a",
			Labels: map[string]string{taugridv1.LabelRefHash: runs.RefHash(ref)}},
			Spec: taugridv1.TauRunSpec{Repository: "research", Commit: commit, Target: "default",
				Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: ref}}},
	).Build()
	api := &server.RunsAPI{Client: c, APIReader: c, Tokens: &server.Tokens{Reader: c, Namespace: "tau-system", Clock: clock.RealClock{}}}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// attacker is a server someone else runs: it records every request and
// every Authorization header it is sent, and refuses them all.
type attacker struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	tokens   []string
}

func newAttacker(t *testing.T) *attacker {
	t.Helper()
	a := &attacker{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.requests++
		if h := r.Header.Get("Authorization"); h != "" {
			a.tokens = append(a.tokens, h)
		}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"invalid token"}`)
	}))
	t.Cleanup(a.Close)
	return a
}

// seen is how many requests reached the attacker and the tokens it got.
func (a *attacker) seen() (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests, append([]string(nil), a.tokens...)
}

// A stranger's repository commits .tau/config.yaml naming the stranger's
// server. The researcher clones it, has TAU_TOKEN exported, and types the
// usual commands: the server gets nothing, and tau says why and what to do.
// (Before, every one of these sent TAU_TOKEN to the stranger.)
func TestARepositoryCannotChooseWhereYourTokenGoes(t *testing.T) {
	for name, args := range map[string][]string{
		"list":          {"list"},
		"status":        {"status", "r-20261130-101500-3f9a2c"},
		"logs":          {"logs", "r-20261130-101500-3f9a2c"},
		"diagnose":      {"diagnose", "r-20261130-101500-3f9a2c"},
		"queue":         {"queue"},
		"evidence link": {"evidence", "r-20261130-101500-3f9a2c"},
	} {
		t.Run(name, func(t *testing.T) {
			freshUser(t)
			evil := newAttacker(t)
			enterClone(t, evil.URL)
			t.Setenv("TAU_TOKEN", teamAToken)
			_, _, err := tau(t, args...)
			if n, tokens := evil.seen(); n != 0 || len(tokens) != 0 {
				t.Errorf("the repository's server got %d requests, tokens %q", n, tokens)
			}
			if err == nil || exitCode(err) != exitUsage {
				t.Fatalf("err = %v (exit %d), want the refusal (exit 2)", err, exitCode(err))
			}
			for _, want := range []string{filepath.Join(".tau", "config.yaml") + " names the TauGrid API " + evil.URL,
				"a repository's file", "tau login --api-url " + evil.URL, "--api-url <url>, or export TAU_API_URL"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// `tau run` in the stranger's repository still pushes the run ref (with
// the user's git), but nudges no one: before, it posted the token to the
// repository's api_url.
func TestRunInAStrangersRepositoryNudgesNoOne(t *testing.T) {
	r := newResearcher(t) // before freshUser leaves this package's directory
	freshUser(t)
	evil := newAttacker(t)
	if err := os.MkdirAll(filepath.Join(r.work, ".tau"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.work, ".tau", "config.yaml"), []byte("namespace: team-a\napi_url: "+evil.URL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("-C", r.work, "add", "-A")
	r.git("-C", r.work, "commit", "--quiet", "-m", "api_url")
	t.Chdir(r.work)
	t.Setenv("TAU_TOKEN", teamAToken)
	out, stderr, err := tau(t, "run")
	if err != nil || !runIDRE.MatchString(out) {
		t.Fatalf("tau run: %v\n%s%s", err, out, stderr)
	}
	if n, tokens := evil.seen(); n != 0 || len(tokens) != 0 {
		t.Errorf("the repository's server got %d requests, tokens %q", n, tokens)
	}
	if !strings.Contains(stderr, "next poll") || !strings.Contains(stderr, "tau login --api-url "+evil.URL) {
		t.Errorf("stderr does not say why the controller was not nudged:\n%s", stderr)
	}
}

// Plain http carries the token in the clear to anyone on the path, so tau
// sends tokens over https, or over http to this machine only; it refuses
// before making any request.
func TestTokensGoOverHTTPSOrToThisMachineOnly(t *testing.T) {
	for origin, ok := range map[string]bool{
		"https://tau.example.com": true,
		"http://127.0.0.1:8082":   true,
		"http://127.1.2.3":        true,
		"http://[::1]:8082":       true,
		"http://localhost:8082":   true,
		"http://tau.example.com":  false,
		"http://10.0.0.7:8082":    false,
		"http://[fe80::1]":        false,
		"http://localhost.evil":   false,
		"http://127.0.0.1.nip.io": false,
	} {
		if err := checkTransport(origin); (err == nil) != ok {
			t.Errorf("checkTransport(%s) = %v, want ok=%v", origin, err, ok)
		}
	}

	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"named with --api-url": {nil, []string{"list", "--api-url", "http://tau.invalid:8082"}},
		"named in TAU_API_URL": {map[string]string{"TAU_API_URL": "http://tau.invalid:8082"}, []string{"status", "r-1"}},
		"tau login":            {nil, []string{"login", "--api-url", "http://tau.invalid:8082", "--token-stdin"}},
		"tau init":             {nil, []string{"init", "-n", "team-a", "--api-url", "http://tau.invalid:8082"}},
	} {
		t.Run(name, func(t *testing.T) {
			freshUser(t)
			t.Setenv("TAU_TOKEN", teamAToken)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, _, err := tauIn(t, strings.NewReader(teamAToken), tc.args...)
			if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "http://tau.invalid:8082 is plain http") ||
				!strings.Contains(err.Error(), "tau no longer sends one there") {
				t.Errorf("err = %v (exit %d), want the plain-http refusal", err, exitCode(err))
			}
		})
	}
}

// A compromised or misconfigured route on the real API answers with a
// redirect to another server. The token stays home: the other server gets
// the request without it. (Go's client alone keeps the header between two
// ports of one host, or on a subdomain.)
func TestNoTokenFollowsARedirectToAnotherOrigin(t *testing.T) {
	t.Run("tau list, redirected by the API", func(t *testing.T) {
		freshUser(t)
		api := newTeamAPI(t)
		evil := newAttacker(t)
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/v1/namespaces/team-a/runs" {
				http.Redirect(w, r, evil.URL+r.URL.Path, http.StatusFound)
				return
			}
			api.Config.Handler.ServeHTTP(w, r)
		}))
		defer front.Close()
		t.Setenv("TAU_API_URL", front.URL)
		t.Setenv("TAU_TOKEN", teamAToken)
		if _, _, err := tau(t, "list"); err == nil {
			t.Error("tau list succeeded through a redirect to a server that refuses everything")
		}
		if n, tokens := evil.seen(); n != 1 || len(tokens) != 0 {
			t.Errorf("the other origin got %d requests with tokens %q, want 1 without", n, tokens)
		}
	})
	t.Run("same origin keeps the token", func(t *testing.T) {
		var got string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", http.StatusMovedPermanently)
				return
			}
			got = r.Header.Get("Authorization")
		}))
		defer srv.Close()
		if resp := getWithToken(t, tokenClient(5*time.Second), srv.URL+"/old"); resp != nil {
			resp.Body.Close()
		}
		if got != "Bearer "+teamAToken {
			t.Errorf("a redirect within the origin arrived with Authorization %q", got)
		}
	})
	t.Run("https never redirects to http", func(t *testing.T) {
		evil := newAttacker(t)
		tlsSrv := httptest.NewTLSServer(http.RedirectHandler(evil.URL+"/api/v1/whoami", http.StatusFound))
		defer tlsSrv.Close()
		c := tokenClient(5 * time.Second)
		c.Transport = tlsSrv.Client().Transport // trusts the test certificate
		req, _ := http.NewRequest(http.MethodGet, tlsSrv.URL+"/api/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+teamAToken)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "refused a redirect from https to http") {
			t.Errorf("err = %v, want the downgrade refused", err)
		}
		if n, _ := evil.seen(); n != 0 {
			t.Errorf("the http server got %d requests", n)
		}
	})
	t.Run("the init container's source download", func(t *testing.T) {
		evil := newAttacker(t)
		src := httptest.NewServer(http.RedirectHandler(evil.URL+"/archive.tar.gz", http.StatusFound))
		defer src.Close()
		err := download(context.Background(), src.URL+"/archive.tar.gz", "service-account-token", io.Discard, strings.Repeat("0", 64))
		if err == nil {
			t.Error("download succeeded from a server that refuses everything")
		}
		if n, tokens := evil.seen(); n != 1 || len(tokens) != 0 {
			t.Errorf("the other origin got %d requests with tokens %q, want 1 without", n, tokens)
		}
	})
}

func getWithToken(t *testing.T, c *http.Client, u string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+teamAToken)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// An evidence link on someone's commit points at their own server. With
// TAU_TOKEN and TAU_API_URL set for the real API, `tau evidence verify`
// sends that server no token: a token goes to its own origin only, and a
// real evidence link is signed. (Before, it sent TAU_TOKEN to any URL.)
func TestEvidenceVerifySendsTheTokenToItsOwnOriginOnly(t *testing.T) {
	freshUser(t)
	api := newTeamAPI(t)
	evil := newAttacker(t)
	t.Setenv("TAU_API_URL", api.URL)
	t.Setenv("TAU_TOKEN", teamAToken)
	_, _, err := tau(t, "evidence", "verify", evil.URL+"/runs/team-a/research-1a2b")
	if n, tokens := evil.seen(); n != 1 || len(tokens) != 0 {
		t.Errorf("the other server got %d requests with tokens %q, want 1 without", n, tokens)
	}
	if err == nil || !strings.Contains(err.Error(), "tau login --api-url "+evil.URL) || !strings.Contains(err.Error(), "signed") {
		t.Errorf("err = %v, want why no token went and what to do", err)
	}
}

// Two spellings of one server are one origin; anything else is another.
func TestOriginsCompareAfterNormalisation(t *testing.T) {
	for a, b := range map[string]string{
		"https://TAU.Example.com:443/":  "https://tau.example.com",
		"https://tau.example.com/tau/":  "https://tau.example.com",
		"HTTP://127.0.0.1:80":           "http://127.0.0.1",
		"https://[::1]:443":             "https://[::1]",
		"http://LOCALHOST:8082/api/v1/": "http://localhost:8082",
	} {
		oa, errA := originOf(a)
		ob, errB := originOf(b)
		if errA != nil || errB != nil || oa != ob {
			t.Errorf("originOf(%s) = %s, %v; originOf(%s) = %s, %v; want equal", a, oa, errA, b, ob, errB)
		}
	}
	for a, b := range map[string]string{
		"https://tau.example.com":      "http://tau.example.com",
		"https://tau.example.com:8443": "https://tau.example.com",
		"https://evil.tau.example.com": "https://tau.example.com",
		"http://127.0.0.1:8082":        "http://127.0.0.1:8083",
		"https://tau.example.com.evil": "https://tau.example.com",
	} {
		oa, _ := originOf(a)
		ob, _ := originOf(b)
		if oa == ob {
			t.Errorf("%s and %s are one origin (%s)", a, b, oa)
		}
	}
	for _, bad := range []string{"tau.example.com", "ftp://tau.example.com", "https://user:pw@tau.example.com", "https://", "https:tau"} {
		if o, err := originOf(bad); err == nil {
			t.Errorf("originOf(%q) = %s, want an error", bad, o)
		}
	}
}

// tauIn runs the CLI in-process with stdin.
func tauIn(t *testing.T, stdin io.Reader, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCmd(&out, &errOut)
	cmd.SetIn(stdin)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}
