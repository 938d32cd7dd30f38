package forge

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
)

// gitHub posts commit statuses with go-github.
type gitHub struct {
	c      Config
	client *github.Client
}

func newGitHub(c Config) (*gitHub, error) {
	client := github.NewClient(c.HTTPClient).WithAuthToken(c.Token)
	if api := c.APIURL; api != "" && strings.TrimSuffix(api, "/") != strings.TrimSuffix(DefaultGitHubAPI, "/") {
		var err error
		if client, err = client.WithEnterpriseURLs(api, api); err != nil {
			return nil, &ConfigError{Msg: "invalid GitHub Enterprise API URL"}
		}
	}
	return &gitHub{c: c, client: client}, nil
}

// Post creates a commit status. GitHub has no "running": it stays pending.
func (g *gitHub) Post(ctx context.Context, s Status) (Posted, error) {
	state := string(s.State)
	if s.State == StateRunning {
		state = string(StatePending)
	}
	rs := &github.RepoStatus{State: &state, Context: &s.Context,
		Description: github.String(Shorten(s.Description, MaxDescription))}
	if s.TargetURL != "" {
		rs.TargetURL = &s.TargetURL
	}
	created, resp, err := g.client.Repositories.CreateStatus(ctx, s.Owner, s.Repo, s.SHA, rs)
	if resp != nil {
		g.c.Metrics.quota(GitHub, resp.Header)
	}
	err = g.classify(resp, err)
	g.c.Metrics.observe(GitHub, err)
	if err != nil {
		return Posted{}, err
	}
	return Posted{ID: created.GetID()}, nil
}

// classify turns go-github's errors into this package's; go-github's own
// messages are dropped, as they carry request URLs.
func (g *gitHub) classify(resp *github.Response, err error) error {
	if err == nil {
		return nil
	}
	var hr *http.Response
	var msg string
	var er *github.ErrorResponse
	var rle *github.RateLimitError
	var are *github.AbuseRateLimitError
	switch {
	case errors.As(err, &rle):
		hr, msg = rle.Response, rle.Message
	case errors.As(err, &are):
		// A secondary rate limit: wait as told, or a minute.
		wait := defaultWait
		if are.RetryAfter != nil {
			wait = bound(*are.RetryAfter)
		}
		return &WaitError{Forge: GitHub, After: wait}
	case errors.As(err, &er):
		hr, msg = er.Response, er.Message
	case resp != nil:
		hr = resp.Response
	}
	if hr == nil {
		return transportError(GitHub, ctxErr(err))
	}
	if d, ok := rateLimitWait(hr, g.c.Clock); ok {
		return &WaitError{Forge: GitHub, After: d}
	}
	return &APIError{Forge: GitHub, StatusCode: hr.StatusCode, Message: Shorten(msg, 200)}
}

func ctxErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return err
}

// settle counts the call's quota and outcome and classifies its error.
func (g *gitHub) settle(resp *github.Response, err error) error {
	if resp != nil {
		g.c.Metrics.quota(GitHub, resp.Header)
	}
	err = g.classify(resp, err)
	g.c.Metrics.observe(GitHub, err)
	return err
}
