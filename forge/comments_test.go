package forge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/forge"
)

const marker = "<!-- tau/platform -->"

// commentAPI is how one forge spells the comment calls on pull request 7
// of org/app: each call as "METHOD escaped-path?query".
type commentAPI struct {
	typ     forge.Type
	perPage int
	list    func(page int) string
	create  string
	edit    func(id int64) string
}

var commentAPIs = []commentAPI{
	{typ: forge.GitHub, perPage: 100,
		list: func(p int) string {
			return fmt.Sprintf("GET /api/v3/repos/org/app/issues/7/comments?page=%d&per_page=100", p)
		},
		create: "POST /api/v3/repos/org/app/issues/7/comments",
		edit:   func(id int64) string { return fmt.Sprintf("PATCH /api/v3/repos/org/app/issues/comments/%d", id) }},
	{typ: forge.Gitea, perPage: 50,
		list: func(p int) string {
			return fmt.Sprintf("GET /api/v1/repos/org/app/issues/7/comments?page=%d&limit=50", p)
		},
		create: "POST /api/v1/repos/org/app/issues/7/comments",
		edit:   func(id int64) string { return fmt.Sprintf("PATCH /api/v1/repos/org/app/issues/comments/%d", id) }},
	{typ: forge.GitLab, perPage: 100,
		list: func(p int) string {
			return fmt.Sprintf("GET /api/v4/projects/org%%2Fapp/merge_requests/7/notes?sort=asc&order_by=created_at&page=%d&per_page=100", p)
		},
		create: "POST /api/v4/projects/org%2Fapp/merge_requests/7/notes",
		edit: func(id int64) string {
			return fmt.Sprintf("PUT /api/v4/projects/org%%2Fapp/merge_requests/7/notes/%d", id)
		}},
}

// commentServer is one forge's comments of pull request 7 of org/app, in
// pages, behind the forge's authentication. It records each call and
// the body of each write.
type commentServer struct {
	*httptest.Server
	api commentAPI

	mu       sync.Mutex
	comments []comment
	calls    []string
	writes   []string // the "body" of each write, in order
}

type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

var (
	commentsPath = regexp.MustCompile(`/(comments|notes)$`)
	commentPath  = regexp.MustCompile(`/(?:comments|notes)/(\d+)$`)
)

func newCommentServer(t *testing.T, api commentAPI, comments ...string) *commentServer {
	t.Helper()
	s := &commentServer{api: api}
	for _, b := range comments {
		s.comments = append(s.comments, comment{ID: int64(1000 + len(s.comments)), Body: b})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *commentServer) authorized(r *http.Request) bool {
	switch s.api.typ {
	case forge.GitHub:
		return r.Header.Get("Authorization") == "Bearer "+token
	case forge.Gitea:
		return r.Header.Get("Authorization") == "token "+token
	}
	return r.Header.Get("PRIVATE-TOKEN") == token
}

func (s *commentServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := r.Method + " " + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		call += "?" + r.URL.RawQuery
	}
	s.calls = append(s.calls, call)
	if !s.authorized(r) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"message":"Bad credentials"}`)
		return
	}
	if r.Method == http.MethodGet {
		s.list(w, r)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body) != 1 || r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	text, _ := body["body"].(string)
	s.writes = append(s.writes, text)
	switch m := commentPath.FindStringSubmatch(r.URL.Path); {
	case m == nil && commentsPath.MatchString(r.URL.Path):
		s.comments = append(s.comments, comment{ID: int64(1000 + len(s.comments)), Body: text})
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(s.comments[len(s.comments)-1])
	case m != nil:
		id, _ := strconv.ParseInt(m[1], 10, 64)
		for i := range s.comments {
			if s.comments[i].ID == id {
				s.comments[i].Body = text
				_ = json.NewEncoder(w).Encode(s.comments[i])
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
	}
}

// list answers a page, with GitHub's Link header when another follows.
func (s *commentServer) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("per_page") + q.Get("limit"))
	page, size = max(page, 1), min(max(size, 1), s.api.perPage)
	from, to := min((page-1)*size, len(s.comments)), min(page*size, len(s.comments))
	if s.api.typ == forge.GitHub && to < len(s.comments) {
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?page=%d&per_page=%d>; rel="next"`, r.Host, r.URL.Path, page+1, size))
	}
	_ = json.NewEncoder(w).Encode(append([]comment{}, s.comments[from:to]...))
}

// take returns and forgets the calls so far.
func (s *commentServer) take() (calls, writes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls, writes, s.calls, s.writes = s.calls, s.writes, nil, nil
	return calls, writes
}

func (s *commentServer) marked() []comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []comment
	for _, c := range s.comments {
		if strings.Contains(c.Body, marker) {
			out = append(out, c)
		}
	}
	return out
}

func (s *commentServer) config(tok string) forge.Config {
	return forge.Config{Type: s.api.typ, APIURL: s.URL, Token: tok}
}

// others are n comments without the marker.
func others(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("LGTM %d <!-- tau/other -->", i)
	}
	return out
}

// listCalls are the list calls of pages 1 to n.
func listCalls(api commentAPI, n int) []string {
	var out []string
	for p := 1; p <= n; p++ {
		out = append(out, api.list(p))
	}
	return out
}

func TestUpsertCommentCreatesOneMarkedCommentThenEditsItOnlyWhenItsBodyChanges(t *testing.T) {
	for _, api := range commentAPIs {
		t.Run(string(api.typ), func(t *testing.T) {
			// 120 comments: 2 pages of 100, or 3 of 50 on Gitea.
			srv := newCommentServer(t, api, others(120)...)
			pages := 120/api.perPage + 1
			ctx := context.Background()
			upsert := func(body string) {
				t.Helper()
				if err := forge.UpsertComment(ctx, srv.config(token), "org", "app", 7, marker, body); err != nil {
					t.Fatal(err)
				}
			}

			upsert("## Platform preview\n\nNo run is stranded.")
			calls, writes := srv.take()
			if d := cmp.Diff(append(listCalls(api, pages), api.create), calls); d != "" {
				t.Errorf("first upsert's calls (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{"## Platform preview\n\nNo run is stranded.\n" + marker}, writes); d != "" {
				t.Errorf("created body (-want +got):\n%s", d)
			}

			upsert("## Platform preview\n\nNo run is stranded.")
			calls, writes = srv.take()
			// The marked comment, the 121st, is on the last page.
			if d := cmp.Diff(listCalls(api, pages), calls); d != "" || len(writes) != 0 {
				t.Errorf("the same body again: writes %q, calls (-want +got):\n%s", writes, d)
			}

			upsert("## Platform preview\n\n2 runs are stranded.\n" + marker + "\n")
			calls, writes = srv.take()
			if d := cmp.Diff(append(listCalls(api, pages), api.edit(1120)), calls); d != "" {
				t.Errorf("changed body's calls (-want +got):\n%s", d)
			}
			want := []comment{{ID: 1120, Body: "## Platform preview\n\n2 runs are stranded.\n" + marker + "\n"}}
			if d := cmp.Diff(want, srv.marked()); d != "" {
				t.Errorf("marked comments (-want +got):\n%s", d)
			}
			if d := cmp.Diff(want[0].Body, strings.Join(writes, "")); d != "" {
				t.Errorf("edited body (-want +got):\n%s", d)
			}
		})
	}
}

func TestUpsertCommentEditsTheMarkedCommentOnALaterPage(t *testing.T) {
	for _, api := range commentAPIs {
		t.Run(string(api.typ), func(t *testing.T) {
			list := others(130)
			list[110] = "old preview\n" + marker
			srv := newCommentServer(t, api, list...)
			if err := forge.UpsertComment(context.Background(), srv.config(token), "org", "app", 7, marker, "new preview"); err != nil {
				t.Fatal(err)
			}
			calls, _ := srv.take()
			pages := 110/api.perPage + 1
			if d := cmp.Diff(append(listCalls(api, pages), api.edit(1110)), calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]comment{{ID: 1110, Body: "new preview\n" + marker}}, srv.marked()); d != "" {
				t.Errorf("marked comments (-want +got):\n%s", d)
			}
		})
	}
}

func TestUpsertCommentCutsALongBodyAtARuneKeepingTheMarkerLast(t *testing.T) {
	for _, api := range commentAPIs {
		t.Run(string(api.typ), func(t *testing.T) {
			srv := newCommentServer(t, api)
			long := strings.Repeat("é", 70000) // two bytes each: a byte cut would split one
			if err := forge.UpsertComment(context.Background(), srv.config(token), "org", "app", 7, marker, long); err != nil {
				t.Fatal(err)
			}
			_, writes := srv.take()
			if len(writes) != 1 {
				t.Fatalf("writes %d, want 1", len(writes))
			}
			got := writes[0]
			if n := utf8.RuneCountInString(got); n > forge.MaxCommentBody || n < forge.MaxCommentBody-200 || !utf8.ValidString(got) {
				t.Errorf("cut body: %d characters, valid UTF-8 %t; want valid, at most %d", n, utf8.ValidString(got), forge.MaxCommentBody)
			}
			if !strings.HasSuffix(got, "\n"+marker) || !strings.Contains(got, "preview was cut") {
				t.Errorf("cut body ends %q, want the cut note, then the marker", got[len(got)-120:])
			}
			// The cut body is what the forge shows: no edit follows.
			if err := forge.UpsertComment(context.Background(), srv.config(token), "org", "app", 7, marker, long); err != nil {
				t.Fatal(err)
			}
			if _, writes = srv.take(); len(writes) != 0 {
				t.Errorf("the same long body again wrote %d times", len(writes))
			}
		})
	}
}

func TestUpsertCommentRefusals(t *testing.T) {
	for _, api := range commentAPIs {
		t.Run(string(api.typ), func(t *testing.T) {
			srv := newCommentServer(t, api)
			ctx := context.Background()
			err := forge.UpsertComment(ctx, srv.config("wrong-token-value"), "org", "app", 7, marker, "x")
			var ae *forge.APIError
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || !forge.IsTerminal(err) ||
				strings.Contains(err.Error(), "wrong-token-value") {
				t.Errorf("a wrong token: %v, want a terminal 401 without the token", err)
			}
			var ce *forge.ConfigError
			for name, call := range map[string]func() error{
				"no token":  func() error { return forge.UpsertComment(ctx, srv.config(""), "org", "app", 7, marker, "x") },
				"no marker": func() error { return forge.UpsertComment(ctx, srv.config(token), "org", "app", 7, " ", "x") },
			} {
				if err := call(); !errors.As(err, &ce) {
					t.Errorf("%s: %v, want a ConfigError", name, err)
				}
			}
			if calls, _ := srv.take(); len(calls) != 1 {
				t.Errorf("calls %q, want only the wrong token's list call", calls)
			}
		})
	}
}
