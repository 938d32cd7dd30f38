package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"k8s.io/utils/clock"
)

// PullRequest is an open pull (or merge) request: its number, the commit
// its head is at, and what its author wrote on it.
type PullRequest struct {
	Number int
	Head   string
	// Title and Body are as written (Body is GitLab's description).
	Title, Body string
	// Labels are the label names, in the forge's order; nil when none.
	Labels []string
}

// HeadRef is where the forge keeps the request's head: refs/pull/<n>/head
// on GitHub and Gitea, refs/merge-requests/<n>/head on GitLab.
func (p PullRequest) HeadRef(t Type) string {
	if t == GitLab {
		return fmt.Sprintf("refs/merge-requests/%d/head", p.Number)
	}
	return fmt.Sprintf("refs/pull/%d/head", p.Number)
}

// OpenPullRequests lists up to limit of the repository's open pull
// requests, most recently created first. Forges keep the head refs of
// closed ones for ever; this list is what is open now.
func OpenPullRequests(ctx context.Context, c Config, owner, repo string, limit int) ([]PullRequest, error) {
	c, err := ready(c)
	if err != nil {
		return nil, err
	}
	if c.Type == GitHub {
		g, err := newGitHub(c)
		if err != nil {
			return nil, err
		}
		return g.openPulls(ctx, owner, repo, limit)
	}
	return restOpenPulls(ctx, c, owner, repo, limit)
}

// ready fills in c's HTTP client and clock, as New does, and refuses a
// missing token, an unknown forge, and a Gitea or GitLab without an API
// URL.
func ready(c Config) (Config, error) {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Token == "" {
		return c, &ConfigError{Msg: "no token"}
	}
	switch c.Type {
	case GitHub:
		return c, nil
	case Gitea, GitLab:
		if _, err := url.Parse(c.APIURL); err != nil || c.APIURL == "" {
			return c, &ConfigError{Msg: fmt.Sprintf("%s needs an API URL", c.Type)}
		}
		return c, nil
	}
	return c, &ConfigError{Msg: fmt.Sprintf("unknown forge type %q", c.Type)}
}

func (g *gitHub) openPulls(ctx context.Context, owner, repo string, limit int) ([]PullRequest, error) {
	opts := &github.PullRequestListOptions{State: "open", Sort: "created", Direction: "desc",
		ListOptions: github.ListOptions{PerPage: min(limit, 100)}}
	var out []PullRequest
	for len(out) < limit {
		prs, resp, err := g.client.PullRequests.List(ctx, owner, repo, opts)
		if resp != nil {
			g.c.Metrics.quota(GitHub, resp.Header)
		}
		err = g.classify(resp, err)
		g.c.Metrics.observe(GitHub, err)
		if err != nil {
			return nil, err
		}
		for _, pr := range prs {
			out = append(out, gitHubPull(pr))
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out[:min(len(out), limit)], nil
}

// gitHubPull is a pull request as go-github decodes it, in this package's
// words.
func gitHubPull(pr *github.PullRequest) PullRequest {
	var labels []string
	for _, l := range pr.Labels {
		labels = append(labels, l.GetName())
	}
	return PullRequest{Number: pr.GetNumber(), Head: pr.GetHead().GetSHA(), Title: pr.GetTitle(), Body: pr.GetBody(), Labels: labels}
}

// restOpenPulls pages through Gitea's GET /api/v1/repos/{owner}/{repo}/pulls
// or GitLab's GET /api/v4/projects/{id}/merge_requests.
func restOpenPulls(ctx context.Context, c Config, owner, repo string, limit int) ([]PullRequest, error) {
	var out []PullRequest
	const perPage = 50
	for page := 1; len(out) < limit; page++ {
		var got []PullRequest
		var err error
		if c.Type == GitLab {
			got, err = gitLabPulls(ctx, c, owner, repo, page, perPage)
		} else {
			got, err = giteaPulls(ctx, c, owner, repo, page, perPage)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if len(got) < perPage {
			break
		}
	}
	return out[:min(len(out), limit)], nil
}

func giteaPulls(ctx context.Context, c Config, owner, repo string, page, perPage int) ([]PullRequest, error) {
	endpoint := fmt.Sprintf("%s/api/v1/repos/%s/%s/pulls?state=open&sort=newest&page=%d&limit=%d",
		strings.TrimSuffix(c.APIURL, "/"), url.PathEscape(owner), url.PathEscape(repo), page, perPage)
	var prs []struct {
		Number int    `json:"number"`
		Title  string `json:"title"`
		Body   string `json:"body"`
		Head   struct {
			SHA string `json:"sha"`
		} `json:"head"`
		Labels []struct {
			Name string `json:"name"`
		} `json:"labels"`
	}
	if err := getJSON(ctx, c, endpoint, &prs); err != nil {
		return nil, err
	}
	out := make([]PullRequest, 0, len(prs))
	for _, pr := range prs {
		var labels []string
		for _, l := range pr.Labels {
			labels = append(labels, l.Name)
		}
		out = append(out, PullRequest{Number: pr.Number, Head: pr.Head.SHA, Title: pr.Title, Body: pr.Body, Labels: labels})
	}
	return out, nil
}

func gitLabPulls(ctx context.Context, c Config, owner, repo string, page, perPage int) ([]PullRequest, error) {
	endpoint := fmt.Sprintf("%s/api/v4/projects/%s/merge_requests?state=opened&order_by=created_at&sort=desc&page=%d&per_page=%d",
		strings.TrimSuffix(c.APIURL, "/"), url.PathEscape(owner+"/"+repo), page, perPage)
	var mrs []struct {
		IID         int      `json:"iid"`
		SHA         string   `json:"sha"`
		Title       string   `json:"title"`
		Description string   `json:"description"`
		Labels      []string `json:"labels"`
	}
	if err := getJSON(ctx, c, endpoint, &mrs); err != nil {
		return nil, err
	}
	out := make([]PullRequest, 0, len(mrs))
	for _, mr := range mrs {
		if len(mr.Labels) == 0 {
			mr.Labels = nil // as on the other forges
		}
		out = append(out, PullRequest{Number: mr.IID, Head: mr.SHA, Title: mr.Title, Body: mr.Description, Labels: mr.Labels})
	}
	return out, nil
}

// getJSON GETs endpoint with the forge's token and decodes its answer
// (at most 4 MiB) into out.
func getJSON(ctx context.Context, c Config, endpoint string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return &ConfigError{Msg: "invalid API URL"}
	}
	req.Header.Set("Accept", "application/json")
	if c.Type == GitLab {
		req.Header.Set("PRIVATE-TOKEN", c.Token)
	} else {
		req.Header.Set("Authorization", "token "+c.Token)
	}
	resp, err := c.HTTPClient.Do(req)
	if err != nil {
		err = transportError(c.Type, err)
		c.Metrics.observe(c.Type, err)
		return err
	}
	defer resp.Body.Close()
	c.Metrics.quota(c.Type, resp.Header)
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch resp.StatusCode / 100 {
	case 2:
		if err = json.Unmarshal(raw, out); err != nil {
			err = &APIError{Forge: c.Type, StatusCode: resp.StatusCode, Message: "the answer is not JSON"}
		}
	default:
		if d, ok := rateLimitWait(resp, c.Clock); ok {
			err = &WaitError{Forge: c.Type, After: d}
		} else {
			err = &APIError{Forge: c.Type, StatusCode: resp.StatusCode, Message: apiMessage(raw)}
		}
	}
	c.Metrics.observe(c.Type, err)
	return err
}
