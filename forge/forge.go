// Package forge posts a run's status to the commit it ran, on GitHub,
// Gitea/Forgejo or GitLab. It only speaks the forges' REST APIs; deciding
// what to post and when is the reconciler's job.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/utils/clock"
)

// State is a commit status state, in TauGrid's words; each forge maps it to
// its own vocabulary.
type State string

// The states a run's status goes through. The last three are final.
const (
	StatePending State = "pending" // accepted or queued
	StateRunning State = "running" // admitted or running
	StateSuccess State = "success"
	StateFailure State = "failure" // the run failed
	StateError   State = "error"   // the run was cancelled or could not run
)

// Final says whether no later state follows s.
func (s State) Final() bool {
	return s == StateSuccess || s == StateFailure || s == StateError
}

// MaxDescription is the longest description GitHub accepts.
const MaxDescription = 140

// Status is one commit status to post.
type Status struct {
	Owner, Repo string // from the repository URL; Owner may hold subgroups (GitLab)
	SHA         string
	Context     string
	State       State
	Description string // shortened to MaxDescription characters
	TargetURL   string
	// CheckRunID is the check run to update; 0 creates one. Only check
	// run posters read it.
	CheckRunID int64
	// Summary is the check run's Markdown body; commit statuses have none.
	Summary string
	// Phase is the run phase the status shows, and Generic that phase's
	// line before the run explains itself (e.g. "queued in runs"): the
	// reconciler paces refreshes within a phase, but not the first
	// explanation that replaces the generic line.
	Phase, Generic string
}

// Posted is what the forge answered.
type Posted struct {
	ID int64 // the status's ID on the forge, 0 when it gives none
}

// StatusPoster posts commit statuses to one forge.
type StatusPoster interface {
	Post(ctx context.Context, s Status) (Posted, error)
	// Shows says whether the latest status of s.Context on s.SHA is s (its
	// state, description and link, in the forge's words), and its ID (a
	// check run's, for the next update). It is how a post whose outcome
	// is unknown is settled without posting twice.
	Shows(ctx context.Context, s Status) (Posted, bool, error)
}

// Type names a forge, as TauRepository's spec.forge.type does.
type Type string

// The forges TauGrid posts to.
const (
	GitHub Type = "github"
	Gitea  Type = "gitea"
	GitLab Type = "gitlab"
)

// DefaultGitHubAPI is github.com's API.
const DefaultGitHubAPI = "https://api.github.com/"

// Config says how to reach a forge.
type Config struct {
	Type Type
	// APIURL is the API base: for GitHub Enterprise https://host (or
	// https://host/api/v3/), for Gitea and GitLab the instance's root URL.
	// Empty: api.github.com for GitHub.
	APIURL string
	// Token authenticates; it never appears in an error.
	Token string
	// HTTPClient defaults to a client with a 15 s timeout.
	HTTPClient *http.Client
	// Metrics counts calls; nil counts nothing.
	Metrics *Metrics
	// Clock turns a rate-limit reset time into a wait; nil: the real clock.
	Clock clock.PassiveClock
	// CheckRuns reports GitHub check runs instead of commit statuses; Token
	// must then be a GitHub App installation token (see AppTokens).
	CheckRuns bool
	// Buckets paces calls per credential; nil does not pace.
	Buckets *Buckets
}

// New returns the poster for c.Type.
func New(c Config) (StatusPoster, error) {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Token == "" {
		return nil, &ConfigError{Msg: "no token"}
	}
	p, err := newPoster(c)
	if err != nil || c.Buckets == nil {
		return p, err
	}
	return &paced{StatusPoster: p, forge: c.Type, bucket: c.Buckets.bucketFor(c.APIURL, c.Token), clock: c.Clock}, nil
}

func newPoster(c Config) (StatusPoster, error) {
	switch c.Type {
	case GitHub:
		g, err := newGitHub(c)
		switch {
		case err != nil:
			return nil, err
		case c.CheckRuns:
			return checkRuns{g}, nil
		}
		return g, nil
	case Gitea, GitLab:
		if c.APIURL == "" {
			return nil, &ConfigError{Msg: fmt.Sprintf("%s needs an API URL", c.Type)}
		}
		if _, err := url.Parse(c.APIURL); err != nil {
			return nil, &ConfigError{Msg: "invalid API URL"}
		}
		return &restPoster{c: c}, nil
	}
	return nil, &ConfigError{Msg: fmt.Sprintf("unknown forge type %q", c.Type)}
}

// ParseRepoURL splits a repository URL, https://host/owner/repo(.git) or
// git@host:owner/repo(.git), into the owner (with any subgroups) and name.
// It also returns the URL of the host's root, https://host.
func ParseRepoURL(raw string) (owner, repo, root string, err error) {
	p := raw
	if !strings.Contains(raw, "://") {
		if at, rest, ok := strings.Cut(raw, ":"); ok && strings.Contains(at, "@") {
			_, host, _ := strings.Cut(at, "@")
			root, p = "https://"+host, rest
		} else {
			return "", "", "", &ConfigError{Msg: "repository URL has no scheme"}
		}
	} else {
		u, perr := url.Parse(raw)
		if perr != nil || u.Host == "" {
			return "", "", "", &ConfigError{Msg: "invalid repository URL"}
		}
		root, p = u.Scheme+"://"+u.Host, u.Path
		if u.Scheme != "http" && u.Scheme != "https" {
			root = "https://" + u.Hostname()
		}
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	i := strings.LastIndex(p, "/")
	if i <= 0 || i == len(p)-1 {
		return "", "", "", &ConfigError{Msg: "repository URL is not host/owner/repo"}
	}
	return p[:i], p[i+1:], root, nil
}

// Shorten cuts s to at most n characters, ending in "…" when cut.
func Shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// ConfigError says the forge settings are unusable: a human must fix them.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "forge settings: " + e.Msg }

// APIError is a forge's refusal or failure. It carries the HTTP status and
// the forge's message, never the request's credentials.
type APIError struct {
	Forge      Type
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: HTTP %d", e.Forge, e.StatusCode)
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.Forge, e.StatusCode, e.Message)
}

// Terminal says retrying cannot help: bad credentials, no such repository
// or commit, or the forge's cap of statuses per commit and context (422).
func (e *APIError) Terminal() bool {
	return e.StatusCode >= 400 && e.StatusCode < 500 && e.StatusCode != http.StatusRequestTimeout
}

// WaitError says the forge's rate limit is spent: try again after After.
type WaitError struct {
	Forge Type
	After time.Duration
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("%s: rate limited, retry after %s", e.Forge, e.After.Round(time.Second))
}

// IsTerminal says whether err cannot heal by retrying.
func IsTerminal(err error) bool {
	var ce *ConfigError
	var ae *APIError
	return errors.As(err, &ce) || (errors.As(err, &ae) && ae.Terminal())
}

// Refused says the forge surely did not take a post that failed with err:
// it was never sent (settings, the credential's pace) or the forge
// answered with a refusal. Timeouts, transport failures and 5xx answers
// leave the outcome unknown.
func Refused(err error) bool {
	var ce *ConfigError
	var we *WaitError
	var ae *APIError
	return errors.As(err, &ce) || errors.As(err, &we) || (errors.As(err, &ae) && ae.StatusCode/100 == 4)
}

// RetryAfter returns how long to wait when err is a WaitError.
func RetryAfter(err error) (time.Duration, bool) {
	var we *WaitError
	if errors.As(err, &we) {
		return we.After, true
	}
	return 0, false
}
