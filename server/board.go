package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/board"
)

// The board's sign-in: a browser posts its team's API token to /login once
// and gets a session cookie, HttpOnly, Secure and SameSite=Strict, that
// names a session held here. The session keeps only the token's digest,
// and every request checks that the token still exists, so deleting the
// token's Secret signs its sessions out. Sessions live in this process:
// a restarted controller asks for the token again.
const (
	sessionCookie = "tau_board"
	sessionTTL    = 8 * time.Hour
	maxSessions   = 10000
)

type session struct {
	digest  [32]byte
	expires time.Time
}

type sessions struct {
	mu sync.Mutex
	m  map[string]session
}

func (s *sessions) open(digest [32]byte, now time.Time) string {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	id := base64.RawURLEncoding.EncodeToString(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]session{}
	}
	if len(s.m) >= maxSessions {
		for k, v := range s.m {
			if now.After(v.expires) {
				delete(s.m, k)
			}
		}
	}
	if len(s.m) >= maxSessions { // still full: the oldest goes
		oldest := ""
		for k, v := range s.m {
			if oldest == "" || v.expires.Before(s.m[oldest].expires) {
				oldest = k
			}
		}
		delete(s.m, oldest)
	}
	s.m[id] = session{digest: digest, expires: now.Add(sessionTTL)}
	return id
}

func (s *sessions) get(id string, now time.Time) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if ok && now.After(v.expires) {
		delete(s.m, id)
		return session{}, false
	}
	return v, ok
}

func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

func (a *RunsAPI) boardRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", a.boardHome)
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) { board.Login(w, http.StatusOK, "") })
	mux.HandleFunc("POST /login", a.login)
	mux.HandleFunc("POST /logout", a.logout)
	mux.HandleFunc("GET /teams/{ns}", a.teamBoard)
	mux.HandleFunc("GET /platform", a.platformBoard)
}

// boardNamespace is the namespace the request may read on the board: its
// bearer token's, or its session's. session says it came by cookie.
func (a *RunsAPI) boardNamespace(ctx context.Context, r *http.Request) (ns string, session bool, err error) {
	if token := bearer(r); token != "" {
		ns, err = a.Tokens.NamespaceOf(ctx, token)
		return ns, false, err
	}
	c, cerr := r.Cookie(sessionCookie)
	if errors.Is(cerr, http.ErrNoCookie) { // not signed in
		return "", false, nil
	}
	s, ok := a.sessions.get(c.Value, a.Tokens.Clock.Now())
	if !ok {
		return "", false, nil
	}
	ns, err = a.Tokens.namespaceOfDigest(ctx, s.digest)
	if err == nil && ns == "" { // the token is gone: so is the session
		a.sessions.close(c.Value)
	}
	return ns, true, err
}

// boardReader is the namespace a board request may read (see
// boardNamespace). Where there is none it answers the request itself: 503
// when sign-ins cannot be checked, 401 for a token that is no team's, a
// redirect to /login without a sign-in; ok is false then.
func (a *RunsAPI) boardReader(w http.ResponseWriter, r *http.Request) (ns string, session, ok bool) {
	ns, session, err := a.boardNamespace(r.Context(), r)
	switch {
	case err != nil:
		a.Log.Error(err, "checking a board session")
		board.Message(w, http.StatusServiceUnavailable, "The board cannot check sign-ins now; try again in a moment.")
	case ns == "" && bearer(r) != "":
		board.Message(w, http.StatusUnauthorized, "That token is not a team's API token.")
	case ns == "":
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	default:
		return ns, session, true
	}
	return "", false, false
}

func (a *RunsAPI) boardHome(w http.ResponseWriter, r *http.Request) {
	if ns, _, ok := a.boardReader(w, r); ok {
		http.Redirect(w, r, home(ns), http.StatusSeeOther)
	}
}

// home is where a sign-in of namespace ns lands: its team's board, or the
// platform's for the platform team's token.
func home(ns string) string {
	if ns == taugridv1.APIPlatformAdmin {
		return "/platform"
	}
	return "/teams/" + url.PathEscape(ns)
}

// platformBoard serves every team's summary to the platform team's token.
func (a *RunsAPI) platformBoard(w http.ResponseWriter, r *http.Request) {
	ns, session, ok := a.boardReader(w, r)
	switch {
	case !ok:
	case ns != taugridv1.APIPlatformAdmin:
		board.Message(w, http.StatusForbidden, "The platform board is for the platform team's token; your team's board is at "+home(ns)+".")
	default:
		a.Board.ServePlatform(w, r, session)
	}
}

func (a *RunsAPI) teamBoard(w http.ResponseWriter, r *http.Request) {
	ns, session, ok := a.boardReader(w, r)
	switch {
	case !ok:
	case ns != r.PathValue("ns") && ns != taugridv1.APIPlatformAdmin:
		// Say nothing of the other namespace, not even whether it exists.
		board.Message(w, http.StatusForbidden, "You are signed in for another team: this board is not yours to read.")
	default:
		a.Board.ServeTeam(w, r, r.PathValue("ns"), session)
	}
}

// login takes a team's token from the sign-in form and opens a session.
func (a *RunsAPI) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		board.Message(w, http.StatusForbidden, "Sign in from the board's own page.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	token := strings.TrimSpace(r.PostFormValue("token"))
	ns, err := a.Tokens.NamespaceOf(r.Context(), token)
	switch {
	case err != nil:
		a.Log.Error(err, "checking a board sign-in")
		board.Login(w, http.StatusServiceUnavailable, "The board cannot check tokens now; try again in a moment.")
		return
	case ns == "":
		board.Login(w, http.StatusUnauthorized, "That token is not a team's API token. Ask your platform team for yours.")
		return
	}
	id := a.sessions.open(sha256.Sum256([]byte(token)), a.Tokens.Clock.Now())
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: int(sessionTTL.Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, home(ns), http.StatusSeeOther)
}

func (a *RunsAPI) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil && sameOrigin(r) {
		a.sessions.close(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// sameOrigin refuses a form posted from another site: a browser names the
// page a form came from in Origin.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}
