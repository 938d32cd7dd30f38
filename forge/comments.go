package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"
)

// MaxCommentBody is the longest comment UpsertComment posts, in
// characters: GitHub takes 65,536, and the rest is room to spare.
const MaxCommentBody = 65000

// maxMarker is the longest marker UpsertComment takes, in characters.
const maxMarker = 1000

// maxCommentPages bounds the pages of comments read to find the marked
// one (100 comments a page on GitHub and GitLab, 50 on Gitea).
const maxCommentPages = 50

// cutNote is the line that ends a body cut to MaxCommentBody.
const cutNote = "*The preview was cut here: the rest does not fit in one comment.*"

// comment is a pull request comment (a GitLab merge request note).
type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

// commenter reads and writes the comments of one pull request.
type commenter interface {
	// list returns a page (from 1) of the comments, oldest first, and
	// whether a next page may follow.
	list(ctx context.Context, page int) ([]comment, bool, error)
	create(ctx context.Context, body string) error
	edit(ctx context.Context, id int64, body string) error
}

// UpsertComment keeps one comment on pull (or merge) request number that
// carries marker, an HTML comment such as <!-- tau/platform -->, and reads
// body. marker is added on a line of its own at the end of body unless body
// holds it, and body is cut to MaxCommentBody characters. The comment
// holding marker is edited when its body differs, and left alone when it
// does not; without one, a comment is created.
func UpsertComment(ctx context.Context, c Config, owner, repo string, number int, marker, body string) error {
	c, err := ready(c)
	if err != nil {
		return err
	}
	if strings.TrimSpace(marker) == "" || utf8.RuneCountInString(marker) > maxMarker {
		return &ConfigError{Msg: fmt.Sprintf("a comment marker must hold 1 to %d characters", maxMarker)}
	}
	cm, err := newCommenter(c, owner, repo, number)
	if err != nil {
		return err
	}
	body = commentBody(body, marker)
	found, err := findComment(ctx, c.Type, cm, marker)
	switch {
	case err != nil:
		return err
	case found == nil:
		return cm.create(ctx, body)
	case sameBody(found.Body, body):
		return nil
	}
	return cm.edit(ctx, found.ID, body)
}

// commentBody is body with marker on its own last line unless body holds
// it, cut to MaxCommentBody characters (at a line's end when one is near)
// with a note saying so, marker still last.
func commentBody(body, marker string) string {
	if !strings.Contains(body, marker) {
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		body += marker
	}
	if utf8.RuneCountInString(body) <= MaxCommentBody {
		return body
	}
	tail := "\n\n" + cutNote + "\n" + marker
	kept := string([]rune(body)[:MaxCommentBody-utf8.RuneCountInString(tail)])
	if i := strings.LastIndexByte(kept, '\n'); i >= 0 && len(kept)-i < 2000 {
		kept = kept[:i]
	}
	return kept + tail
}

// sameBody says whether a comment's body as the forge keeps it is want;
// forges may turn line ends into CRLF or trim the ends.
func sameBody(got, want string) bool {
	norm := func(s string) string { return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n")) }
	return norm(got) == norm(want)
}

// findComment pages through the comments for the first holding marker;
// nil when none does. A page that brings no comment not seen before ends
// the search: Gitea (1.27) answers all of an issue's comments whatever
// the page asked.
func findComment(ctx context.Context, t Type, cm commenter, marker string) (*comment, error) {
	seen := map[int64]bool{}
	for page := 1; page <= maxCommentPages; page++ {
		list, more, err := cm.list(ctx, page)
		if err != nil {
			return nil, err
		}
		fresh := false
		for _, c := range list {
			if seen[c.ID] {
				continue
			}
			seen[c.ID], fresh = true, true
			if strings.Contains(c.Body, marker) {
				return &c, nil
			}
		}
		if !more || !fresh {
			return nil, nil
		}
	}
	// Creating one now could add a second marked comment on every call.
	return nil, fmt.Errorf("%s: the pull request has more than %d pages of comments; the marked comment was not sought further", t, maxCommentPages)
}

// newCommenter returns the commenter for c.Type; c is ready.
func newCommenter(c Config, owner, repo string, number int) (commenter, error) {
	if c.Type == GitHub {
		g, err := newGitHub(c)
		if err != nil {
			return nil, err
		}
		return &gitHubComments{g: g, owner: owner, repo: repo, number: number}, nil
	}
	return newRESTComments(c, owner, repo, number), nil
}

// gitHubComments are a pull request's issue comments, through go-github.
type gitHubComments struct {
	g           *gitHub
	owner, repo string
	number      int
}

func (h *gitHubComments) list(ctx context.Context, page int) ([]comment, bool, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100, Page: page}}
	list, resp, err := h.g.client.Issues.ListComments(ctx, h.owner, h.repo, h.number, opts)
	if err = h.g.settle(resp, err); err != nil {
		return nil, false, err
	}
	out := make([]comment, 0, len(list))
	for _, c := range list {
		out = append(out, comment{ID: c.GetID(), Body: c.GetBody()})
	}
	return out, resp.NextPage != 0, nil
}

func (h *gitHubComments) create(ctx context.Context, body string) error {
	_, resp, err := h.g.client.Issues.CreateComment(ctx, h.owner, h.repo, h.number, &github.IssueComment{Body: &body})
	return h.g.settle(resp, err)
}

func (h *gitHubComments) edit(ctx context.Context, id int64, body string) error {
	_, resp, err := h.g.client.Issues.EditComment(ctx, h.owner, h.repo, id, &github.IssueComment{Body: &body})
	return h.g.settle(resp, err)
}

// restComments are a pull request's comments on Gitea
// (/api/v1/repos/{owner}/{repo}/issues/{n}/comments) or its notes on
// GitLab (/api/v4/projects/{id}/merge_requests/{iid}/notes).
type restComments struct {
	c Config
	// endpoint lists and creates; one comment is editPrefix + its ID.
	endpoint, editPrefix string
	editMethod           string
	pageQuery            string // %d: the page
	perPage              int
}

func newRESTComments(c Config, owner, repo string, number int) *restComments {
	base := strings.TrimSuffix(c.APIURL, "/")
	if c.Type == GitLab {
		notes := fmt.Sprintf("%s/api/v4/projects/%s/merge_requests/%d/notes",
			strings.TrimSuffix(base, "/api/v4"), url.PathEscape(owner+"/"+repo), number)
		return &restComments{c: c, endpoint: notes, editPrefix: notes + "/", editMethod: http.MethodPut,
			pageQuery: "?sort=asc&order_by=created_at&page=%d&per_page=100", perPage: 100}
	}
	issues := fmt.Sprintf("%s/api/v1/repos/%s/%s/issues/",
		strings.TrimSuffix(base, "/api/v1"), url.PathEscape(owner), url.PathEscape(repo))
	return &restComments{c: c, endpoint: fmt.Sprintf("%s%d/comments", issues, number), editPrefix: issues + "comments/",
		editMethod: http.MethodPatch, pageQuery: "?page=%d&limit=50", perPage: 50}
}

func (r *restComments) list(ctx context.Context, page int) ([]comment, bool, error) {
	var list []comment
	if err := getJSON(ctx, r.c, r.endpoint+fmt.Sprintf(r.pageQuery, page), &list); err != nil {
		return nil, false, err
	}
	return list, len(list) >= r.perPage, nil
}

func (r *restComments) create(ctx context.Context, body string) error {
	return r.write(ctx, http.MethodPost, r.endpoint, body)
}

func (r *restComments) edit(ctx context.Context, id int64, body string) error {
	return r.write(ctx, r.editMethod, fmt.Sprintf("%s%d", r.editPrefix, id), body)
}

// write sends {"body": body} and counts the call.
func (r *restComments) write(ctx context.Context, method, endpoint, body string) error {
	p := &restPoster{c: r.c}
	var created comment
	err := p.do(ctx, method, endpoint, map[string]string{"body": body}, &created)
	r.c.Metrics.observe(r.c.Type, err)
	return err
}
