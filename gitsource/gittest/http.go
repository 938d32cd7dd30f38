package gittest

import (
	"crypto/subtle"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"sync/atomic"
)

// HTTPBackend is the git smart-HTTP server program.
const HTTPBackend = "/usr/lib/git-core/git-http-backend"

// HTTPServer serves the bare repositories under Root with `git
// http-backend`. With User set, every request must carry those basic-auth
// credentials.
type HTTPServer struct {
	Root           string
	User, Password string

	requests atomic.Int64
}

// Requests counts the requests served so far, authenticated or not.
func (s *HTTPServer) Requests() int64 { return s.requests.Load() }

// ServeHTTP implements http.Handler.
func (s *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if s.User != "" {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.User)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(s.Password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
	}
	h := &cgi.Handler{
		Path: HTTPBackend,
		Root: "/",
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"HOME=" + os.TempDir(),
			"REMOTE_USER=git",
		},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard, // git's complaints reach the client anyway
	}
	h.ServeHTTP(w, r)
}
