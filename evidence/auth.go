package evidence

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Links signs and checks the capability a commit's evidence link carries:
// an HMAC over the run's namespace, name and an expiry, so whoever can
// read the commit opens that run's page and its own bundles and blobs,
// and nothing else, until the link expires.
type Links struct {
	// Key is the HMAC-SHA256 key: at least 32 random bytes, kept in a
	// Secret so links outlive restarts.
	Key []byte
	// TTL is how long a link is valid from the run's creation.
	TTL time.Duration
}

// The query parameters of a signed link.
const (
	paramExpires = "expires"
	paramSig     = "sig"
)

// MinKeyBytes is the shortest signing key Links accepts.
const MinKeyBytes = 32

// Query is the capability for run ns/name valid until expires, as a URL
// query: expires=<unix seconds>&sig=<base64url HMAC>.
func (l *Links) Query(ns, name string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return url.Values{paramExpires: {exp}, paramSig: {l.sign(ns, name, exp)}}.Encode()
}

func (l *Links) sign(ns, name, exp string) string {
	m := hmac.New(sha256.New, l.Key)
	// Each field on its own line: names hold no newline, so no two
	// (namespace, name, expiry) sign the same bytes.
	m.Write([]byte("taugrid evidence link v1\n" + ns + "\n" + name + "\n" + exp + "\n"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// allows says whether q is a capability for ns/name that has not expired
// at now. The signature is compared in constant time.
func (l *Links) allows(ns, name string, q url.Values, now time.Time) bool {
	if l == nil || len(l.Key) < MinKeyBytes {
		return false
	}
	exp, sig := q.Get(paramExpires), q.Get(paramSig)
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || sig == "" || !now.Before(time.Unix(unix, 0)) {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(l.sign(ns, name, exp)))
}

// capability is the query to carry on the page's own links: the request's
// signed link, stripped of anything else.
func capability(q url.Values) string {
	return url.Values{paramExpires: {q.Get(paramExpires)}, paramSig: {q.Get(paramSig)}}.Encode()
}

// TokenNamespaces names the namespace a team's API token reads ("" for a
// token that is none); the runs API's reconciler.Tokens is one.
type TokenNamespaces interface {
	NamespaceOf(ctx context.Context, token string) (string, error)
}

// errNoCredential and errForbidden: the request carries no credential, or
// one that does not open this run.
var (
	errNoCredential = errors.New("no credential")
	errForbidden    = errors.New("forbidden")
)

// grant is how a request may read run ns/name.
type grant struct {
	// link is the signed-link query to carry on the page's links; "" when
	// the request came with the team's token.
	link string
}

// authorize lets a request read run ns/name if it carries a valid signed
// link for exactly that run, or a team API token for its namespace.
func (s *Server) authorize(r *http.Request, ns, name string) (grant, error) {
	q := r.URL.Query()
	if q.Has(paramSig) {
		if s.Links.allows(ns, name, q, s.now()) {
			return grant{link: capability(q)}, nil
		}
		return grant{}, errForbidden
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" || s.Tokens == nil {
		return grant{}, errNoCredential
	}
	got, err := s.Tokens.NamespaceOf(r.Context(), strings.TrimSpace(token))
	switch {
	case err != nil:
		return grant{}, err
	case got == "" || got != ns:
		return grant{}, errForbidden
	}
	return grant{}, nil
}

// guard wraps a handler of one run's URLs: it answers 401 without a
// credential, 403 with one that does not open the run, and says nothing
// about the run either way.
func (s *Server) guard(h func(http.ResponseWriter, *http.Request, grant)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("ns"), strings.TrimSuffix(r.PathValue("name"), ".json")
		g, err := s.authorize(r, ns, name)
		switch {
		case errors.Is(err, errNoCredential):
			w.Header().Set("WWW-Authenticate", `Bearer realm="taugrid evidence"`)
			http.Error(w, "open the evidence link from the commit, or send your team's API token (TAU_TOKEN) as a bearer token", http.StatusUnauthorized)
		case errors.Is(err, errForbidden):
			http.Error(w, "this link or token does not open this run's evidence", http.StatusForbidden)
		case err != nil:
			s.Log.Error(err, "checking an evidence token")
			http.Error(w, "cannot check the token now; try again", http.StatusServiceUnavailable)
		default:
			h(w, r, g)
		}
	}
}
