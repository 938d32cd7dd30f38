package controlplane

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needsGitea skips in -short mode; a Gitea not built skips, except with
// CI=true, where it fails.
func needsGitea(t testing.TB) {
	t.Helper()
	needsControlPlane(t)
	if _, err := GiteaBinary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and Gitea is missing: %v", err)
		}
		t.Skipf("Gitea is missing (%v)", err)
	}
}

func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// The harness's Gitea takes a push over HTTP from the git CLI, keeps the
// statuses posted to a commit, and sends a signed webhook for a tag push
// to a loopback address.
func TestGiteaTakesPushesKeepsStatusesAndSendsWebhooks(t *testing.T) {
	needsGitea(t)
	ctx := context.Background()
	start := time.Now()
	g, err := StartGitea(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	t.Logf("Gitea ready in %s", time.Since(start).Round(time.Millisecond))

	hooks := make(chan http.Header, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooks <- r.Header.Clone()
	}))
	defer receiver.Close()
	if err := g.CreateRepo(ctx, "tau/research"); err != nil {
		t.Fatal(err)
	}
	if err := g.CreateHook(ctx, "tau/research", receiver.URL+"/hooks/x", "hook-secret"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gitCLI(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "tau.yaml"), []byte("schema_version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, dir, "add", ".")
	gitCLI(t, dir, "commit", "-q", "-m", "first")
	sha := gitCLI(t, dir, "rev-parse", "HEAD")
	gitCLI(t, dir, "tag", "run/first")
	gitCLI(t, dir, "push", "-q", g.PushURL("tau/research"), "main", "run/first")

	select {
	case h := <-hooks:
		if h.Get("X-Gitea-Event") == "" || h.Get("X-Gitea-Signature") == "" {
			t.Errorf("webhook headers %v, want a signed Gitea event", h)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook within 20s of the push")
	}
	for _, state := range []string{"pending", "success"} {
		body := map[string]string{"state": state, "context": "tau/default r1", "description": state}
		if err := g.API(ctx, http.MethodPost, "repos/tau/research/statuses/"+sha, body, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := g.CommitStatuses(ctx, "tau/research", sha)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].State != "pending" || got[1].State != "success" || got[1].Created.IsZero() {
		raw, _ := json.Marshal(got)
		t.Errorf("statuses %s, want pending then success, with creation times", raw)
	}
}
