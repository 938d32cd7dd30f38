package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v62/github"
)

// maxStatusPages bounds the pages read to find one context among a
// commit's statuses (50 contexts a page on Gitea, 100 on GitHub).
const maxStatusPages = 10

// shownStatus is a commit status as a forge lists it.
type shownStatus struct {
	ID          int64  `json:"id"`
	Context     string `json:"context"`
	Name        string `json:"name"`   // GitLab's context
	Status      string `json:"status"` // the state, on Gitea and GitLab
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// Shows reads the commit's latest status per context (Gitea's combined
// status, GitLab's statuses named s.Context) and compares s's.
func (p *restPoster) Shows(ctx context.Context, s Status) (Posted, bool, error) {
	post, body, err := p.request(s)
	if err != nil {
		return Posted{}, false, err
	}
	for page := 1; page <= maxStatusPages; page++ {
		var list []shownStatus
		if p.c.Type == GitLab {
			endpoint := strings.Replace(post, "/statuses/", "/repository/commits/", 1) + "/statuses?name=" + url.QueryEscape(s.Context)
			err = p.do(ctx, http.MethodGet, endpoint, nil, &list)
		} else {
			var combined struct {
				Statuses []shownStatus `json:"statuses"`
			}
			endpoint := strings.Replace(post, "/statuses/", "/commits/", 1) + fmt.Sprintf("/status?limit=50&page=%d", page)
			err = p.do(ctx, http.MethodGet, endpoint, nil, &combined)
			list = combined.Statuses
		}
		p.c.Metrics.observe(p.c.Type, err)
		if err != nil {
			return Posted{}, false, err
		}
		for _, st := range list {
			if st.Context == s.Context || (p.c.Type == GitLab && st.Name == s.Context) {
				same := st.Status == body["state"] && st.Description == body["description"] && st.TargetURL == body["target_url"]
				return Posted{ID: st.ID}, same, nil
			}
		}
		if p.c.Type == GitLab || len(list) < 50 {
			break
		}
	}
	return Posted{}, false, nil
}

// Shows reads the commit's combined status and compares s's.
func (g *gitHub) Shows(ctx context.Context, s Status) (Posted, bool, error) {
	state := string(s.State)
	if s.State == StateRunning {
		state = string(StatePending)
	}
	opts := &github.ListOptions{PerPage: 100}
	for page := 1; page <= maxStatusPages; page++ {
		opts.Page = page
		combined, resp, err := g.client.Repositories.GetCombinedStatus(ctx, s.Owner, s.Repo, s.SHA, opts)
		err = g.classify(resp, err)
		g.c.Metrics.observe(GitHub, err)
		if err != nil {
			return Posted{}, false, err
		}
		for _, st := range combined.Statuses {
			if st.GetContext() == s.Context {
				same := st.GetState() == state && st.GetDescription() == Shorten(s.Description, MaxDescription) &&
					st.GetTargetURL() == s.TargetURL
				return Posted{ID: st.GetID()}, same, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
	}
	return Posted{}, false, nil
}

// Shows finds the newest check run named s.Context on the commit and
// compares its status, conclusion, title and link with s's. Its ID comes
// back either way, so that a check run whose creation went unrecorded is
// updated rather than made twice.
func (g checkRuns) Shows(ctx context.Context, s Status) (Posted, bool, error) {
	list, resp, err := g.client.Checks.ListCheckRunsForRef(ctx, s.Owner, s.Repo, s.SHA,
		&github.ListCheckRunsOptions{CheckName: &s.Context, Filter: github.String("latest"), ListOptions: github.ListOptions{PerPage: 100}})
	err = g.classify(resp, err)
	g.c.Metrics.observe(GitHub, err)
	if err != nil {
		return Posted{}, false, err
	}
	var newest *github.CheckRun
	for _, cr := range list.CheckRuns {
		if cr.GetName() == s.Context && (newest == nil || cr.GetID() > newest.GetID()) {
			newest = cr
		}
	}
	if newest == nil {
		return Posted{}, false, nil
	}
	status, conclusion := checkRunState(s.State)
	same := newest.GetStatus() == status && newest.GetConclusion() == ptrValue(conclusion) &&
		newest.GetOutput().GetTitle() == Shorten(s.Description, MaxDescription) && newest.GetDetailsURL() == s.TargetURL
	return Posted{ID: newest.GetID()}, same, nil
}

// Shows takes a token from the credential's bucket, as Post does.
func (p *paced) Shows(ctx context.Context, s Status) (Posted, bool, error) {
	if err := p.wait(s); err != nil {
		return Posted{}, false, err
	}
	return p.StatusPoster.Shows(ctx, s)
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
