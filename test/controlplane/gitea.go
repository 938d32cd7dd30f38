package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// BinGitea is the Gitea server hack/testbin.sh builds. Next to the real
// file (the cache entry the link in the binary directory points at) lies
// root/, the options, templates and public files a build without the
// bindata tag reads at run time.
const BinGitea = "gitea"

// Gitea is a real Gitea server on a loopback port, with one admin user
// and an API token of every scope, for tests that need a forge: commit
// statuses, webhooks, and git over HTTP.
type Gitea struct {
	// URL is the server's root, e.g. http://127.0.0.1:41234/ (no token).
	URL string
	// User owns the repositories the tests create; Token is its API token.
	User, Token string
	// LogPath is where the server logs.
	LogPath string

	dir    string
	child  *child
	client *http.Client
}

// GiteaBinary returns the Gitea binary in the control-plane binary
// directory, or an error naming the fix.
func GiteaBinary() (string, error) {
	dir := os.Getenv("TAU_TESTBIN")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		out, err := exec.Command(filepath.Join(root, "hack", "testbin.sh"), "--dir").Output()
		if err != nil {
			return "", fmt.Errorf("hack/testbin.sh --dir: %w", exitDetail(err))
		}
		dir = strings.TrimSpace(string(out))
	}
	if err := RequireBinaries(dir, BinGitea); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(filepath.Join(dir, BinGitea))
}

// StartGitea starts Gitea with its data in a new directory under $TMPDIR,
// creates the admin user and its token, and returns once the API answers.
func StartGitea(ctx context.Context) (*Gitea, error) {
	bin, err := GiteaBinary()
	if err != nil {
		return nil, err
	}
	static := filepath.Join(filepath.Dir(bin), "root")
	if _, err := os.Stat(filepath.Join(static, "options", "locale")); err != nil {
		return nil, fmt.Errorf("gitea: no locales under %s: run make testbin", static)
	}
	sweepStale()
	dir, err := os.MkdirTemp("", workDirPrefix+"gitea-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	var g *Gitea
	for range 3 { // a port taken between freePort and the bind
		if g, err = startGitea(ctx, bin, static, dir); err == nil || !addrInUse(err) {
			break
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return g, nil
}

func startGitea(ctx context.Context, bin, static, dir string) (*Gitea, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	work := filepath.Join(dir, fmt.Sprint(port))
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	g := &Gitea{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), User: "tau", dir: dir,
		LogPath: filepath.Join(work, "gitea.log"), client: &http.Client{Timeout: 30 * time.Second}}
	ini := filepath.Join(work, "app.ini")
	if err := os.WriteFile(ini, []byte(giteaConfig(work, static, u.Username, port)), 0o644); err != nil {
		return nil, err
	}
	args := []string{"--config", ini, "--work-path", work}
	if g.child, err = startChild("gitea", g.LogPath, bin, append([]string{"web"}, args...)...); err != nil {
		return nil, err
	}
	if err := g.child.waitReady(ctx, g.URL+"api/healthz", 90*time.Second); err != nil {
		g.child.kill()
		return nil, err
	}
	if err := g.createAdmin(ctx, bin, args); err != nil {
		g.child.kill()
		return nil, err
	}
	return g, nil
}

// giteaConfig is an app.ini for a throwaway server: sqlite, no SSH, no
// mail, no Actions, webhooks allowed to loopback, and the locales and
// templates read from static.
func giteaConfig(work, static, runUser string, port int) string {
	return fmt.Sprintf(`APP_NAME = tau-test
RUN_MODE = prod
RUN_USER = %[3]s
WORK_PATH = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[4]d
ROOT_URL = http://127.0.0.1:%[4]d/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
STATIC_ROOT_PATH = %[2]s
APP_DATA_PATH = %[1]s/data

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[1]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = tau-test-secret-key
PASSWORD_HASH_ALGO = pbkdf2_hi

[service]
DISABLE_REGISTRATION = true

[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 5

[actions]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[mailer]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[log]
MODE = console
LEVEL = Warn
ROOT_PATH = %[1]s/log
`, work, static, runUser, port)
}

var tokenLine = regexp.MustCompile(`Access token was successfully created\.\.\. ([0-9a-f]+)`)

// createAdmin creates the admin user with a token of every scope.
func (g *Gitea) createAdmin(ctx context.Context, bin string, args []string) error {
	cmd := exec.CommandContext(ctx, bin, append([]string{"admin", "user", "create", "--admin", "--username", g.User,
		"--password", "tau-test-password", "--email", "tau@example.com", "--must-change-password=false",
		"--access-token", "--access-token-name", "tests", "--access-token-scopes", "all"}, args...)...)
	out, err := cmd.CombinedOutput()
	m := tokenLine.FindSubmatch(out)
	if err != nil || m == nil {
		return &ComponentError{Component: "gitea admin user create", LogPath: g.LogPath,
			Err: fmt.Errorf("%w: %s", err, lastLines(string(out), 5))}
	}
	g.Token = string(m[1])
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Stop kills the server and removes its data.
func (g *Gitea) Stop() {
	g.child.kill()
	_ = os.RemoveAll(g.dir)
}

// CloneURL is the HTTP URL of a repository ("owner/name"), without
// credentials: what a TauRepository's spec.url holds.
func (g *Gitea) CloneURL(repo string) string {
	return g.URL + repo + ".git"
}

// PushURL is CloneURL with the admin's token, for the git CLI.
func (g *Gitea) PushURL(repo string) string {
	u, _ := url.Parse(g.CloneURL(repo))
	u.User = url.UserPassword(g.User, g.Token)
	return u.String()
}

// CreateRepo creates an empty public repository ("owner/name"). An owner
// other than the admin is an organisation, created when missing.
func (g *Gitea) CreateRepo(ctx context.Context, repo string) error {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		return fmt.Errorf("gitea: repository %q is not owner/name", repo)
	}
	body := map[string]any{"name": name, "private": false}
	if owner == g.User {
		return g.API(ctx, http.MethodPost, "user/repos", body, nil)
	}
	var ge *GiteaError
	if err := g.API(ctx, http.MethodPost, "orgs", map[string]any{"username": owner, "visibility": "public"}, nil); err != nil &&
		(!errors.As(err, &ge) || ge.StatusCode != http.StatusUnprocessableEntity) {
		return err
	}
	return g.API(ctx, http.MethodPost, "orgs/"+owner+"/repos", body, nil)
}

// GiteaStatus is a commit status as Gitea's API lists it.
type GiteaStatus struct {
	ID          int64     `json:"id"`
	Context     string    `json:"context"`
	State       string    `json:"status"`
	Description string    `json:"description"`
	TargetURL   string    `json:"target_url"`
	Created     time.Time `json:"created_at"`
}

// CommitStatuses lists every status posted to a commit, oldest first.
func (g *Gitea) CommitStatuses(ctx context.Context, repo, sha string) ([]GiteaStatus, error) { // repo: owner/name
	var all []GiteaStatus
	for page := 1; ; page++ {
		var list []GiteaStatus
		path := fmt.Sprintf("repos/%s/commits/%s/statuses?sort=oldest&limit=50&page=%d", repo, sha, page)
		if err := g.API(ctx, http.MethodGet, path, nil, &list); err != nil {
			return nil, err
		}
		all = append(all, list...)
		if len(list) < 50 {
			return all, nil
		}
	}
}

// CreateHook adds a webhook of Gitea's own type that sends push and tag
// creation events to target, signed with secret. repo is owner/name.
func (g *Gitea) CreateHook(ctx context.Context, repo, target, secret string) error {
	return g.API(ctx, http.MethodPost, "repos/"+repo+"/hooks", map[string]any{
		"type": "gitea", "active": true, "events": []string{"push", "create"},
		"config": map[string]string{"url": target, "content_type": "json", "secret": secret},
	}, nil)
}

// WaitForBranch waits up to 30 s until Gitea shows branch of repo
// (owner/name) at commit, or at any commit when commit is "". Gitea
// records a push from its hooks' queue a moment after the push returns: a
// pull request opened before then finds no head (404), or the branch's
// previous one.
func (g *Gitea) WaitForBranch(ctx context.Context, repo, branch, commit string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var b struct {
			Commit struct {
				ID string `json:"id"`
			} `json:"commit"`
		}
		err := g.API(ctx, http.MethodGet, "repos/"+repo+"/branches/"+branch, nil, &b)
		if err == nil && (commit == "" || b.Commit.ID == commit) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("at %s", b.Commit.ID)
			}
			return fmt.Errorf("gitea: branch %s of %s not at %q 30 s after the push: %w", branch, repo, commit, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// API calls Gitea's REST API (path relative to /api/v1/) as the admin,
// sending body as JSON when not nil and decoding the answer into out.
func (g *Gitea) API(ctx context.Context, method, path string, body, out any) error {
	var data io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		data = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL+"api/v1/"+path, data)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+g.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode/100 != 2 {
		return &GiteaError{Method: method, Path: strings.SplitN(path, "?", 2)[0], StatusCode: resp.StatusCode, Body: lastLines(string(raw), 3)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// GiteaError is an API call Gitea refused.
type GiteaError struct {
	Method, Path string
	StatusCode   int
	Body         string
}

func (e *GiteaError) Error() string {
	return fmt.Sprintf("gitea: %s %s: HTTP %d: %s", e.Method, e.Path, e.StatusCode, e.Body)
}
