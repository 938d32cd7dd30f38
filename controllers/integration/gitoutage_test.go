package integration

import (
	"net/http"
	"strings"
	"sync"
)

// gitOutages are the repositories (by path, "/<name>.git") the test git
// server answers 503 for, as a forge does in an outage: a real HTTP
// failure that gitsource classifies as transient.
var gitOutages sync.Map

// outages serves the test git server, failing the repositories in
// gitOutages.
type outages struct{ next http.Handler }

func (o outages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	repo, _, _ := strings.Cut(r.URL.Path, ".git")
	if _, down := gitOutages.Load(repo + ".git"); down {
		http.Error(w, "the forge is down", http.StatusServiceUnavailable)
		return
	}
	o.next.ServeHTTP(w, r)
}

// outage makes the git server fail every request for this repository
// until the returned function is called (or the test ends).
func (r *gitRepo) outage() (end func()) {
	path := strings.TrimPrefix(r.URL, gitServer.URL)
	gitOutages.Store(path, true)
	end = func() { gitOutages.Delete(path) }
	r.t.Cleanup(end)
	return end
}
