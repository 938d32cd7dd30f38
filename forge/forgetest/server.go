// Package forgetest serves the commit status subset of the GitHub, Gitea
// and GitLab REST APIs, for tests: it checks authentication, records calls
// and answers failures on demand.
package forgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"

	"github.com/taugrid/taugrid/forge"
)

// Call is one status post the server received.
type Call struct {
	Owner, Repo, SHA string
	// Context, State, Description and TargetURL as the forge spells them
	// (GitLab's "name" is Context).
	Context, State, Description, TargetURL string
	// CheckRunID is the check run created or updated (check runs only).
	CheckRunID int64
	// Code is what the server answered.
	Code int
}

// Failure is an answer the server gives instead of accepting a post.
type Failure struct {
	Code   int
	Header map[string]string
	Body   string
}

// Server is a forge's status API. Start it with New.
type Server struct {
	*httptest.Server
	Type  forge.Type
	Token string
	// Cap is the most statuses per (SHA, context); past it the server
	// answers 422, as GitHub does at 1,000. 0: no cap.
	Cap int
	// App, when set, makes the GitHub server an App installation: it mints
	// Token for a JWT signed by App.Key and serves check runs.
	App *App

	mu    sync.Mutex
	calls []Call
	fails []Failure
	count map[string]int
	reads int
}

// New starts a server speaking t's API that accepts token.
func New(t forge.Type, token string) *Server {
	s := &Server{Type: t, Token: token, count: map[string]int{}}
	s.Server = httptest.NewServer(s)
	return s
}

// FailNext makes the next n requests (posts and reads) answer f.
func (s *Server) FailNext(n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails = append(s.fails, f)
	}
}

// Calls returns the posts received so far, refused ones included.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Reads counts the reads of a commit's statuses or check runs.
func (s *Server) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// Accepted returns the posts the server accepted.
func (s *Server) Accepted() []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Code/100 == 2 {
			out = append(out, c)
		}
	}
	return out
}

var paths = map[forge.Type]*regexp.Regexp{
	forge.GitHub: regexp.MustCompile(`^/api/v3/repos/([^/]+)/([^/]+)/statuses/([0-9a-f]+)$`),
	forge.Gitea:  regexp.MustCompile(`^/api/v1/repos/([^/]+)/([^/]+)/statuses/([0-9a-f]+)$`),
	forge.GitLab: regexp.MustCompile(`^/api/v4/projects/(.+)%2F([^/%]+)/statuses/([0-9a-f]+)$`),
}

func (s *Server) authorized(r *http.Request) bool {
	switch s.Type {
	case forge.GitHub:
		return r.Header.Get("Authorization") == "Bearer "+s.Token
	case forge.Gitea:
		return r.Header.Get("Authorization") == "token "+s.Token
	}
	return r.Header.Get("PRIVATE-TOKEN") == s.Token
}

// ServeHTTP answers POST .../statuses/{sha} and, for an App, the
// installation token and check run endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.App != nil && s.serveApp(w, r) {
		return
	}
	if r.Method == http.MethodGet && s.serveRead(w, r) {
		return
	}
	m := paths[s.Type].FindStringSubmatch(r.URL.EscapedPath())
	if r.Method != http.MethodPost || m == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	body, ok := decode(w, r)
	if !ok {
		return
	}
	c := Call{Owner: strings.ReplaceAll(m[1], "%2F", "/"), Repo: m[2], SHA: m[3], Context: str(body, "context"),
		State: str(body, "state"), Description: str(body, "description"), TargetURL: str(body, "target_url")}
	if s.Type == forge.GitLab {
		c.Context = str(body, "name")
	}
	s.reply(w, r, c)
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, c Call) {
	code, header, resp := s.answer(r, c)
	for k, v := range header {
		w.Header().Set(k, v)
	}
	writeJSON(w, code, resp)
}

func decode(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return nil, false
	}
	return body, true
}

// str reads a string field, or one under "output".
func str(body map[string]any, keys ...string) string {
	for _, k := range keys[:len(keys)-1] {
		body, _ = body[k].(map[string]any)
	}
	v, _ := body[keys[len(keys)-1]].(string)
	return v
}

func (s *Server) answer(r *http.Request, c Call) (int, map[string]string, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	code, header, resp := http.StatusCreated, map[string]string(nil), any(nil)
	key := c.SHA + "\x00" + c.Context
	switch {
	case !s.authorized(r):
		code, resp = http.StatusUnauthorized, map[string]any{"message": "Bad credentials"}
	case len(s.fails) > 0:
		f := s.fails[0]
		s.fails = s.fails[1:]
		code, header, resp = f.Code, f.Header, map[string]any{"message": f.Body}
	case s.Cap > 0 && s.count[key] >= s.Cap:
		code, resp = http.StatusUnprocessableEntity, map[string]any{"message": fmt.Sprintf("This SHA and context has reached the maximum number of statuses (%d).", s.Cap)}
	default:
		s.count[key]++
		if c.CheckRunID == 0 && s.App != nil {
			c.CheckRunID = int64(len(s.calls) + 1)
		}
		id := c.CheckRunID
		if id == 0 {
			id = int64(len(s.calls) + 1)
		}
		resp = map[string]any{"id": id, "state": c.State, "context": c.Context}
	}
	c.Code = code
	s.calls = append(s.calls, c)
	return code, header, resp
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
