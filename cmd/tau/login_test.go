package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// tau login asks the API whether the token is one before it stores it;
// what it stores only the user can read, and tau then reads the stored
// API without TAU_API_URL or TAU_TOKEN, also when a repository names it
// in another spelling.
func TestLoginStoresATokenOnlyAfterTheAPIAcceptsIt(t *testing.T) {
	path := freshUser(t)
	api := newTeamAPI(t)

	_, _, err := tauIn(t, strings.NewReader("guess\n"), "login", "--api-url", api.URL, "--token-stdin")
	if err == nil || !strings.Contains(err.Error(), "refused the token") || !strings.Contains(err.Error(), "nothing stored") {
		t.Errorf("a token the API refuses: %v, want its refusal and nothing stored", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused token was stored: %v", err)
	}

	out, stderr, err := tauIn(t, strings.NewReader(teamAToken+"\n"), "login", "--api-url", api.URL, "--token-stdin")
	if err != nil {
		t.Fatalf("tau login: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "Logged in to "+api.URL+": the token reads namespace team-a") || !strings.Contains(out, path) || strings.Contains(out+stderr, teamAToken) {
		t.Errorf("tau login says %q", out+stderr)
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v (%v), want %04o", p, fi.Mode().Perm(), err, want)
			}
		}
	}

	out, stderr, err = tau(t, "list")
	if err != nil || !strings.Contains(out, "r-20261130-101500-3f9a2c") {
		t.Errorf("tau list with the stored login and nothing else: %v\n%s%s", err, out, stderr)
	}
	enterClone(t, strings.Replace(api.URL, "http://", "HTTP://", 1)+"/")
	if out, stderr, err = tau(t, "list"); err != nil || !strings.Contains(out, "r-20261130-101500-3f9a2c") {
		t.Errorf("tau list in a repository naming the stored API: %v\n%s%s", err, out, stderr)
	}

	out, _, err = tau(t, "logout")
	if err != nil || !strings.Contains(out, "Logged out of "+api.URL) {
		t.Fatalf("tau logout: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), teamAToken) {
		t.Errorf("the token is still stored after tau logout:\n%s", data)
	}
	if _, _, err := tau(t, "list"); err == nil || !strings.Contains(err.Error(), "which you have not logged in to") {
		t.Errorf("after tau logout, the repository's api_url is a stranger's again: %v", err)
	}
}

// tau login never takes the token as an argument (ps shows arguments),
// and without a terminal it asks for --token-stdin.
func TestLoginReadsTheTokenFromStdinTAU_TOKENOrAPrompt(t *testing.T) {
	freshUser(t)
	api := newTeamAPI(t)
	if _, _, err := tau(t, "login", "--api-url", api.URL, "--token", teamAToken); err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Errorf("tau login --token: %v, want no such flag", err)
	}
	if _, _, err := tauIn(t, strings.NewReader(""), "login", "--api-url", api.URL); err == nil || !strings.Contains(err.Error(), "--token-stdin") {
		t.Errorf("tau login without a terminal: %v, want a hint for --token-stdin", err)
	}
	if _, _, err := tauIn(t, strings.NewReader("a b\n"), "login", "--api-url", api.URL, "--token-stdin"); err == nil || !strings.Contains(err.Error(), "give the token alone") {
		t.Errorf("tau login with two words on stdin: %v", err)
	}
	if _, _, err := tau(t, "login"); err == nil || !strings.Contains(err.Error(), "tau login --api-url https://") {
		t.Errorf("tau login without an API: %v, want how to name it", err)
	}
}

// Another user could read (and so may have copied) a credentials file
// that is not private; tau refuses to use it and says how to fix it.
func TestACredentialsFileOthersCanReadIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix mode bits")
	}
	path := freshUser(t)
	api := newTeamAPI(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("apis:\n  - api_url: "+api.URL+"\n    token: "+teamAToken+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"login", "--api-url", api.URL, "--token-stdin"}, {"logout"}} {
		_, _, err := tauIn(t, strings.NewReader(teamAToken), args...)
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "chmod 600 "+path) || !strings.Contains(err.Error(), "mode 0644") {
			t.Errorf("tau %s with a 0644 credentials file: %v, want a refusal naming chmod 600", args[0], err)
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tau(t, "list"); err != nil {
		t.Errorf("after chmod 600: %v", err)
	}
}

// Logged in to two APIs, tau sends each its own token and never the other
// one; with neither named, it asks which.
func TestEachAPIGetsItsOwnTokenOnly(t *testing.T) {
	freshUser(t)
	a, b := recordingAPI(t), recordingAPI(t)
	for srv, token := range map[*recordingServer]string{a: teamAToken, b: teamBToken} {
		if _, stderr, err := tauIn(t, strings.NewReader(token), "login", "--api-url", srv.URL, "--token-stdin"); err != nil {
			t.Fatalf("tau login: %v\n%s", err, stderr)
		}
	}
	if _, _, err := tau(t, "list"); err == nil || !strings.Contains(err.Error(), "several TauGrid APIs") || !strings.Contains(err.Error(), a.URL) {
		t.Errorf("tau list with two logins and no API named: %v", err)
	}
	if _, _, err := tau(t, "list", "--api-url", a.URL); err != nil {
		t.Errorf("tau list --api-url a: %v", err)
	}
	enterClone(t, b.URL)
	if _, _, err := tau(t, "list"); err != nil {
		t.Errorf("tau list in a repository naming b: %v", err)
	}
	if got := a.tokens(); strings.Contains(got, teamBToken) || !strings.Contains(got, teamAToken) {
		t.Errorf("API a was sent %s", got)
	}
	if got := b.tokens(); strings.Contains(got, teamAToken) || !strings.Contains(got, teamBToken) {
		t.Errorf("API b was sent %s", got)
	}
}

// A user who relied on the committed api_url with TAU_TOKEN exported is
// told the change and the one command that fixes it; a user with
// TAU_API_URL and TAU_TOKEN exported notices nothing.
func TestUsersOfTheOldWayAreToldTheOneCommandThatFixesIt(t *testing.T) {
	freshUser(t)
	api := newTeamAPI(t)
	t.Setenv("TAU_TOKEN", teamAToken)

	t.Setenv("TAU_API_URL", api.URL)
	if out, _, err := tau(t, "list"); err != nil || !strings.Contains(out, "r-20261130-101500-3f9a2c") {
		t.Errorf("TAU_API_URL and TAU_TOKEN: %v\n%s", err, out)
	}

	t.Setenv("TAU_API_URL", "")
	enterClone(t, api.URL)
	_, _, err := tau(t, "list")
	if err == nil || !strings.Contains(err.Error(), "tau no longer sends your token") || !strings.Contains(err.Error(), "tau login --api-url "+api.URL) {
		t.Fatalf("the committed api_url with TAU_TOKEN: %v, want the change named and tau login", err)
	}
	out, stderr, err := tauIn(t, strings.NewReader(""), "login", "--api-url", api.URL)
	if err != nil || !strings.Contains(stderr, "Using the token in TAU_TOKEN") {
		t.Fatalf("tau login --api-url %s with TAU_TOKEN: %v\n%s%s", api.URL, err, out, stderr)
	}
	if out, _, err := tau(t, "list"); err != nil || !strings.Contains(out, "r-20261130-101500-3f9a2c") {
		t.Errorf("after tau login: %v\n%s", err, out)
	}
}

// recordingServer is a TauGrid API that records the tokens it is sent.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func recordingAPI(t *testing.T) *recordingServer {
	t.Helper()
	api := newTeamAPI(t)
	r := &recordingServer{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Get("Authorization"))
		r.mu.Unlock()
		api.Config.Handler.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recordingServer) tokens() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.seen, ", ")
}
