package forge_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/test/controlplane"
)

// realGitea starts a Gitea of its own for the test. It skips in -short
// mode and when Gitea is not built, except with CI=true, where a missing
// Gitea fails.
func realGitea(t *testing.T, ctx context.Context) *controlplane.Gitea {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real Gitea; run without -short")
	}
	if _, err := controlplane.GiteaBinary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and Gitea is missing: %v", err)
		}
		t.Skipf("Gitea is missing (%v)", err)
	}
	g, err := controlplane.StartGitea(ctx)
	if err != nil {
		t.Fatalf("starting Gitea: %v", err)
	}
	t.Cleanup(g.Stop)
	return g
}

// writes counts the requests other than GETs that pass through it.
type writes struct {
	mu sync.Mutex
	n  int
}

func (w *writes) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		w.mu.Lock()
		w.n++
		w.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (w *writes) take() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.n
	w.n = 0
	return n
}

// pushBranch pushes main with one commit and branch with a second one to
// the repository, and returns the branch's head.
func pushBranch(t *testing.T, ctx context.Context, g *controlplane.Gitea, repo, branch string) string {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		args = append([]string{"-C", dir, "-c", "user.name=tau", "-c", "user.email=tau@example.com"}, args...)
		out, err := exec.CommandContext(ctx, "git", args...).CombinedOutput()
		if err != nil {
			// Never the push URL, which holds the token.
			t.Fatalf("git %s: %v: %s", args[6], err, strings.ReplaceAll(string(out), g.Token, "<token>"))
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "start")
	git("push", "-q", g.PushURL(repo), "main")
	git("checkout", "-q", "-b", branch)
	git("commit", "-q", "--allow-empty", "-m", "change quotas")
	git("push", "-q", g.PushURL(repo), branch)
	head := git("rev-parse", "HEAD")
	if err := g.WaitForBranch(ctx, repo, "main", ""); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitForBranch(ctx, repo, branch, head); err != nil {
		t.Fatal(err)
	}
	return head
}

func TestUpsertCommentAndOpenPullRequestsOnARealGitea(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := realGitea(t, ctx)
	owner, name := g.User, "app"
	repo := owner + "/" + name
	if err := g.CreateRepo(ctx, repo); err != nil {
		t.Fatal(err)
	}
	head := pushBranch(t, ctx, g, repo, "quotas")
	var pr struct {
		Number int `json:"number"`
	}
	if err := g.API(ctx, http.MethodPost, "repos/"+repo+"/pulls",
		map[string]any{"head": "quotas", "base": "main", "title": "Raise quotas", "body": "Why.\n\n<!-- tau: 1 -->"}, &pr); err != nil {
		t.Fatal(err)
	}
	var label struct {
		ID int64 `json:"id"`
	}
	if err := g.API(ctx, http.MethodPost, "repos/"+repo+"/labels", map[string]any{"name": "tau/preview", "color": "#00aabb"}, &label); err != nil {
		t.Fatal(err)
	}
	if err := g.API(ctx, http.MethodPost, fmt.Sprintf("repos/%s/issues/%d/labels", repo, pr.Number),
		map[string]any{"labels": []int64{label.ID}}, nil); err != nil {
		t.Fatal(err)
	}

	w := &writes{}
	c := forge.Config{Type: forge.Gitea, APIURL: g.URL, Token: g.Token, HTTPClient: &http.Client{Transport: w, Timeout: 15 * time.Second}}
	prs, err := forge.OpenPullRequests(ctx, c, owner, name, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []forge.PullRequest{{Number: pr.Number, Head: head, Title: "Raise quotas", Body: "Why.\n\n<!-- tau: 1 -->", Labels: []string{"tau/preview"}}}
	if d := cmp.Diff(want, prs); d != "" {
		t.Errorf("open pull requests (-want +got):\n%s", d)
	}

	// More than a page (50) of other comments before the marked one:
	// Gitea answers them all whatever the page asked.
	comments := fmt.Sprintf("repos/%s/issues/%d/comments", repo, pr.Number)
	for i := range 55 {
		if err := g.API(ctx, http.MethodPost, comments, map[string]any{"body": fmt.Sprintf("LGTM %d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	upsert := func(body string, wantWrites int) {
		t.Helper()
		if err := forge.UpsertComment(ctx, c, owner, name, pr.Number, marker, body); err != nil {
			t.Fatal(err)
		}
		if n := w.take(); n != wantWrites {
			t.Errorf("upserting %q: %d writes, want %d", body, n, wantWrites)
		}
	}
	upsert("## Preview\n\nNo run is stranded.", 1)
	upsert("## Preview\n\nNo run is stranded.", 0)
	upsert("## Preview\n\n2 runs are stranded.", 1)
	upsert("## Preview\n\n2 runs are stranded.", 0)

	var all []struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
	}
	if err := g.API(ctx, http.MethodGet, comments, nil, &all); err != nil {
		t.Fatal(err)
	}
	var marked []string
	for _, cm := range all {
		if strings.Contains(cm.Body, marker) {
			marked = append(marked, cm.Body)
		}
	}
	if d := cmp.Diff([]string{"## Preview\n\n2 runs are stranded.\n" + marker}, marked); d != "" || len(all) != 56 {
		t.Errorf("%d comments, want 56; marked ones (-want +got):\n%s", len(all), d)
	}
}
