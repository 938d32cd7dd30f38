package forge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/taugrid/taugrid/forge"
)

// pullsServer speaks the open pull request list of each forge: 120 open
// pull requests, newest first, 50 or fewer a page, behind the forge's
// authentication.
func pullsServer(t *testing.T, typ forge.Type) *httptest.Server {
	t.Helper()
	page := func(r *http.Request, pageKey, sizeKey string) []int {
		p, _ := strconv.Atoi(r.URL.Query().Get(pageKey))
		n, _ := strconv.Atoi(r.URL.Query().Get(sizeKey))
		p, n = max(p, 1), min(max(n, 1), 50)
		var out []int
		for i := (p-1)*n + 1; i <= p*n && i <= 120; i++ {
			out = append(out, 121-i) // newest first
		}
		return out
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v3/repos/org/app/pulls", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token || r.URL.Query().Get("state") != "open" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		nums := page(r, "page", "per_page")
		if p, _ := strconv.Atoi(r.URL.Query().Get("page")); len(nums) > 0 && nums[len(nums)-1] > 1 {
			w.Header().Set("Link", fmt.Sprintf(`<%s/api/v3/repos/org/app/pulls?state=open&page=%d&per_page=50>; rel="next"`, "http://"+r.Host, max(p, 1)+1))
		}
		var prs []map[string]any
		for _, n := range nums {
			prs = append(prs, map[string]any{"number": n, "head": map[string]any{"sha": fmt.Sprintf("%040d", n)},
				"title": title(n), "body": body(n), "labels": labelObjects(n)})
		}
		_ = json.NewEncoder(w).Encode(prs)
	})
	mux.HandleFunc("GET /api/v1/repos/org/app/pulls", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token "+token || r.URL.Query().Get("state") != "open" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var prs []map[string]any
		for _, n := range page(r, "page", "limit") {
			prs = append(prs, map[string]any{"number": n, "head": map[string]any{"sha": fmt.Sprintf("%040d", n)},
				"title": title(n), "body": body(n), "labels": labelObjects(n)})
		}
		_ = json.NewEncoder(w).Encode(prs)
	})
	mux.HandleFunc("GET /api/v4/projects/{id}/merge_requests", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("PRIVATE-TOKEN") != token || r.URL.Query().Get("state") != "opened" || r.PathValue("id") != "org/app" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var mrs []map[string]any
		for _, n := range page(r, "page", "per_page") {
			mrs = append(mrs, map[string]any{"iid": n, "sha": fmt.Sprintf("%040d", n),
				"title": title(n), "description": body(n), "labels": append([]string{}, labels(n)...)})
		}
		_ = json.NewEncoder(w).Encode(mrs)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// title, body and labels are what pull request n carries: every third has
// no labels (the forges then send [], which reads as nil), the rest one or two.
func title(n int) string { return fmt.Sprintf("Change %d", n) }

func body(n int) string { return fmt.Sprintf("Why change %d.\n\n<!-- tau: 1 -->", n) }

func labels(n int) []string {
	switch n % 3 {
	case 0:
		return nil
	case 1:
		return []string{"tau/preview"}
	}
	return []string{"tau/preview", "size/M"}
}

// labelObjects are n's labels as GitHub and Gitea send them.
func labelObjects(n int) []map[string]any {
	out := []map[string]any{}
	for i, l := range labels(n) {
		out = append(out, map[string]any{"id": 10 + i, "name": l, "color": "00aabb"})
	}
	return out
}

func TestOpenPullRequestsAreListedNewestFirstUpToALimit(t *testing.T) {
	for _, typ := range []forge.Type{forge.GitHub, forge.Gitea, forge.GitLab} {
		t.Run(string(typ), func(t *testing.T) {
			srv := pullsServer(t, typ)
			got, err := forge.OpenPullRequests(context.Background(), forge.Config{Type: typ, APIURL: srv.URL, Token: token}, "org", "app", 70)
			if err != nil {
				t.Fatal(err)
			}
			var want []forge.PullRequest
			for n := 120; n > 50; n-- {
				want = append(want, forge.PullRequest{Number: n, Head: fmt.Sprintf("%040d", n),
					Title: title(n), Body: body(n), Labels: labels(n)})
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("open pull requests (-want +got):\n%s", d)
			}
			_, err = forge.OpenPullRequests(context.Background(), forge.Config{Type: typ, APIURL: srv.URL, Token: "wrong"}, "org", "app", 70)
			if !forge.IsTerminal(err) || strings.Contains(fmt.Sprint(err), "wrong") {
				t.Errorf("a wrong token: %v, want a terminal error without the token", err)
			}
		})
	}
	if ref := (forge.PullRequest{Number: 7}).HeadRef(forge.GitLab); ref != "refs/merge-requests/7/head" {
		t.Errorf("GitLab head ref %s", ref)
	}
}
