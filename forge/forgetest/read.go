package forgetest

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/taugrid/taugrid/forge"
)

var readPaths = map[forge.Type]*regexp.Regexp{
	forge.GitHub: regexp.MustCompile(`^/api/v3/repos/([^/]+)/([^/]+)/commits/([0-9a-f]+)/(status|check-runs)$`),
	forge.Gitea:  regexp.MustCompile(`^/api/v1/repos/([^/]+)/([^/]+)/commits/([0-9a-f]+)/(status)$`),
	forge.GitLab: regexp.MustCompile(`^/api/v4/projects/(.+)%2F([^/%]+)/repository/commits/([0-9a-f]+)/(statuses)$`),
}

// serveRead answers the reads of what a commit shows: the latest status
// per context (GitHub's and Gitea's combined status, GitLab's statuses of
// one name) and GitHub's check runs of one name. One page holds them all.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request) bool {
	m := readPaths[s.Type].FindStringSubmatch(r.URL.EscapedPath())
	if m == nil {
		return false
	}
	owner, repo, sha, what := strings.ReplaceAll(m[1], "%2F", "/"), m[2], m[3], m[4]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return true
	}
	if len(s.fails) > 0 {
		f := s.fails[0]
		s.fails = s.fails[1:]
		for k, v := range f.Header {
			w.Header().Set(k, v)
		}
		writeJSON(w, f.Code, map[string]any{"message": f.Body})
		return true
	}
	latest := s.latest(owner, repo, sha, r.URL.Query().Get("name")+r.URL.Query().Get("check_name"))
	switch what {
	case "check-runs":
		var runs []any
		for _, c := range latest {
			run := map[string]any{"id": c.CheckRunID, "name": c.Context, "details_url": c.TargetURL,
				"output": map[string]any{"title": c.Description}, "status": c.State}
			if c.State == "success" || c.State == "failure" || c.State == "cancelled" {
				run["status"], run["conclusion"] = "completed", c.State
			}
			runs = append(runs, run)
		}
		writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
	case "statuses": // GitLab
		var list []any
		for _, c := range latest {
			list = append(list, map[string]any{"id": c.id, "name": c.Context, "status": c.State,
				"description": c.Description, "target_url": c.TargetURL})
		}
		writeJSON(w, http.StatusOK, list)
	default:
		var list []any
		for _, c := range latest {
			st := map[string]any{"id": c.id, "context": c.Context, "description": c.Description, "target_url": c.TargetURL}
			if s.Type == forge.Gitea {
				st["status"] = c.State
			} else {
				st["state"] = c.State
			}
			list = append(list, st)
		}
		writeJSON(w, http.StatusOK, map[string]any{"statuses": list, "total_count": len(list)})
	}
	return true
}

// shown is an accepted post and its position in the call log.
type shown struct {
	Call
	id int64
}

// latest is the newest accepted post per context on a commit, only of
// context name when name is set.
func (s *Server) latest(owner, repo, sha, name string) []shown {
	by := map[string]int{}
	var out []shown
	for i, c := range s.calls {
		if c.Code/100 != 2 || c.Owner != owner || c.Repo != repo || (c.SHA != sha && c.CheckRunID == 0) || (name != "" && c.Context != name) {
			continue
		}
		if c.SHA != sha && !s.checkRunOn(c.CheckRunID, sha) {
			continue
		}
		if j, ok := by[c.Context]; ok {
			out[j] = shown{c, int64(i + 1)}
			continue
		}
		by[c.Context] = len(out)
		out = append(out, shown{c, int64(i + 1)})
	}
	return out
}

// checkRunOn says whether check run id was created on sha (updates carry
// no SHA).
func (s *Server) checkRunOn(id int64, sha string) bool {
	for _, c := range s.calls {
		if c.CheckRunID == id && c.SHA == sha {
			return true
		}
	}
	return false
}
