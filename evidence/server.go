package evidence

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

//go:embed page.html.tmpl page.css
var pageFiles embed.FS

var pageTemplate = template.Must(template.New("page.html.tmpl").Funcs(template.FuncMap{
	"short":      short,
	"time":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"ptime":      clockTime,
	"pct":        pct,
	"lower":      strings.ToLower,
	"css":        pageCSS,
	"derefi":     exitCode,
	"number":     func(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) },
	"charts":     ChartsOf,
	"usageChart": UsageChart,
	"add":        func(a, b float64) float64 { return a + b },
	"sub":        func(a, b float64) float64 { return a - b },
}).ParseFS(pageFiles, "page.html.tmpl"))

func clockTime(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func exitCode(p *int32) string {
	if p == nil {
		return "—"
	}
	return strconv.Itoa(int(*p))
}

// pageCSS is the page's stylesheet: our own embedded file, trusted as CSS.
func pageCSS() template.CSS {
	b, _ := pageFiles.ReadFile("page.css")
	return template.CSS(b)
}

// RunSource reads a run from the cluster; nil, nil when it is gone.
type RunSource interface {
	LiveRun(ctx context.Context, namespace, name string) (*Live, error)
}

// Server serves the evidence page of each run, read-only, to requests
// that carry the run's signed link (see Links) or the team's API token
// for its namespace; anything else gets 401 or 403 and no data:
//
//	GET /runs/<namespace>/<name>              HTML, or JSON for Accept: application/json
//	GET /runs/<namespace>/<name>.json         the same data as JSON
//	GET /runs/<namespace>/<name>/bundles/<n>.json   a sealed manifest, as stored
//	GET /runs/<namespace>/<name>/blobs/<sha256>     an artifact of one of the run's bundles
//	GET /runs/<namespace>/<name>/attestations/<n>.json   a bundle's signed in-toto attestation
//	GET /runs/<namespace>/<name>/cosign.pub         the public key the attestations verify with
type Server struct {
	Store Store
	// Runs reads live runs; nil serves sealed evidence only.
	Runs RunSource
	Now  func() time.Time
	Log  logr.Logger
	// Links checks signed links; nil accepts none.
	Links *Links
	// Tokens checks teams' API tokens; nil accepts none.
	Tokens TokenNamespaces
	// PublicKey gives the key that signs attestations, for the page to
	// show; nil shows none.
	PublicKey PublicKeySource

	cache sync.Map // Key -> *Loaded: sealed bundles never change
	pages sync.Map // pageKey -> rendered page of a finished or gone run
	mu    sync.Mutex
	sizes map[*sync.Map]int // entries per cache, approximately
}

// PublicKeySource gives the attestations' public key (PKIX PEM) and its
// fingerprint.
type PublicKeySource interface {
	PublicKey(ctx context.Context) (pem []byte, fingerprint string, err error)
}

// maxCached bounds the bundle cache; past it the cache starts over.
const maxCached = 1024

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// Handler routes the page's URLs.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs/{ns}/{name}", s.guard(s.servePage))
	mux.HandleFunc("GET /runs/{ns}/{name}/bundles/{file}", s.guard(s.serveManifest))
	mux.HandleFunc("GET /runs/{ns}/{name}/blobs/{digest}", s.guard(s.serveBlob))
	mux.HandleFunc("GET /runs/{ns}/{name}/attestations/{file}", s.guard(s.serveAttestation))
	mux.HandleFunc("GET /runs/{ns}/{name}/cosign.pub", s.guard(s.servePublicKey))
	return securityHeaders(mux)
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request, g grant) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	asJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
	if n, ok := strings.CutSuffix(name, ".json"); ok {
		name, asJSON = n, true
	}
	if !dnsLabel.MatchString(ns) || !dnsLabel.MatchString(name) {
		http.NotFound(w, r)
		return
	}
	body, err := s.page(r.Context(), ns, name, asJSON, g.link)
	switch {
	case errors.Is(err, ErrNotFound):
		http.Error(w, "no run "+ns+"/"+name+" and no evidence of one", http.StatusNotFound)
		return
	case err != nil:
		s.Log.Error(err, "building the evidence page", "run", ns+"/"+name)
		http.Error(w, "the evidence store did not answer; try again shortly", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(body)
}

// page renders a run's page. The page of a finished or gone run only
// changes with the run object or a new bundle, so it is rendered once per
// (resource version, bundles, link). The page's own links carry the
// request's signed link, so a link's reader can open the bundles too.
func (s *Server) page(ctx context.Context, ns, name string, asJSON bool, link string) ([]byte, error) {
	live, bundles, err := s.gather(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	signing, err := s.signingKey(ctx, ns, name)
	if err != nil { // the evidence is still there to read: the page shows no key
		s.Log.Error(err, "reading the attestation key for the evidence page")
		signing = &SigningKey{}
	}
	key := ""
	if live == nil || final(live.Run.Status.Phase) {
		key = pageKey(ns, name, asJSON, live, bundles) + " " + signing.Fingerprint + " " + link
		if b, ok := s.pages.Load(key); ok {
			return b.([]byte), nil
		}
	}
	v := BuildView(live, bundles, &Masker{}, s.now())
	if signing.Fingerprint != "" {
		v.SigningKey = signing
	}
	v.carry(link)
	var buf bytes.Buffer
	if asJSON {
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = pageTemplate.Execute(&buf, v)
	}
	if err != nil {
		return nil, err
	}
	if key != "" {
		s.remember(&s.pages, key, buf.Bytes())
	}
	return buf.Bytes(), nil
}

func pageKey(ns, name string, asJSON bool, live *Live, bundles []*Loaded) string {
	k := fmt.Sprintf("%s/%s json=%v", ns, name, asJSON)
	if live != nil {
		k += fmt.Sprintf(" %s@%s %s", live.Run.UID, live.Run.ResourceVersion, live.RepositoryURL)
	}
	for _, b := range bundles {
		k += " " + b.Digest
	}
	return k
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// View builds the page data of one run; ErrNotFound when neither the
// cluster nor the store knows it.
func (s *Server) View(ctx context.Context, ns, name string) (*View, error) {
	live, bundles, err := s.gather(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return BuildView(live, bundles, &Masker{}, s.now()), nil
}

// gather reads the live run and the sealed bundles of a run.
func (s *Server) gather(ctx context.Context, ns, name string) (*Live, []*Loaded, error) {
	var live *Live
	if s.Runs != nil {
		var err error
		if live, err = s.Runs.LiveRun(ctx, ns, name); err != nil {
			return nil, nil, err
		}
	}
	bundles, err := s.bundles(ctx, ns, name)
	if err != nil && live == nil {
		return nil, nil, err
	}
	if live == nil && len(bundles) == 0 {
		return nil, nil, ErrNotFound
	}
	return live, bundles, nil
}

// bundles loads every sealed bundle of a run, oldest attempt first.
func (s *Server) bundles(ctx context.Context, ns, name string) ([]*Loaded, error) {
	entries, err := s.Store.Manifests(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	var keys []Key
	for _, e := range entries {
		if k, ok := parseKeyPath(e.Path); ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b Key) int { return a.Attempt - b.Attempt })
	out := make([]*Loaded, 0, len(keys))
	for _, k := range keys {
		l, err := s.load(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func (s *Server) load(ctx context.Context, k Key) (*Loaded, error) {
	if l, ok := s.cache.Load(k); ok {
		return l.(*Loaded), nil
	}
	l, err := LoadBundle(ctx, s.Store, k)
	if err != nil {
		return nil, err
	}
	s.remember(&s.cache, k, l)
	return l, nil
}

// remember caches v; past maxCached entries the cache starts over.
func (s *Server) remember(m *sync.Map, k, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sizes == nil {
		s.sizes = map[*sync.Map]int{}
	}
	if s.sizes[m] >= maxCached {
		m.Clear()
		s.sizes[m] = 0
	}
	s.sizes[m]++
	m.Store(k, v)
}

// LoadBundle reads a sealed bundle's manifest, record and log tails.
func LoadBundle(ctx context.Context, st Store, k Key) (*Loaded, error) {
	m, raw, err := Load(ctx, st, k)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Manifest: m, Digest: "sha256:" + digestOf(raw), Logs: map[string][]byte{}}
	switch _, err := st.Attestation(ctx, k); {
	case err == nil:
		l.Attested = true
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	for _, a := range m.Artifacts {
		if a.Name != ArtifactRecord && !strings.HasPrefix(a.Name, PrefixLogs) {
			continue
		}
		data, err := st.Blob(ctx, a.SHA256)
		if err != nil {
			return nil, err
		}
		if a.Name == ArtifactRecord {
			l.Record = &Record{}
			if err := json.Unmarshal(data, l.Record); err != nil {
				return nil, err
			}
			continue
		}
		l.Logs[a.Name] = data
	}
	return l, nil
}

func (s *Server) serveManifest(w http.ResponseWriter, r *http.Request, _ grant) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	n, err := strconv.Atoi(strings.TrimSuffix(r.PathValue("file"), ".json"))
	if err != nil || !dnsLabel.MatchString(ns) || !dnsLabel.MatchString(name) {
		http.NotFound(w, r)
		return
	}
	raw, err := s.Store.Manifest(r.Context(), Key{Namespace: ns, Run: name, Attempt: n})
	if s.storeError(w, r, err) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// signingKey is the attestations' public key, with its page-relative URL;
// empty when the page has no key source.
func (s *Server) signingKey(ctx context.Context, ns, name string) (*SigningKey, error) {
	if s.PublicKey == nil {
		return &SigningKey{}, nil
	}
	pem, fp, err := s.PublicKey.PublicKey(ctx)
	if err != nil {
		return nil, err
	}
	return &SigningKey{PublicKey: string(pem), Fingerprint: fp, URL: "/runs/" + ns + "/" + name + "/cosign.pub"}, nil
}

// serveAttestation serves a bundle's attestation, as stored.
func (s *Server) serveAttestation(w http.ResponseWriter, r *http.Request, _ grant) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	n, err := strconv.Atoi(strings.TrimSuffix(r.PathValue("file"), ".json"))
	if err != nil || !dnsLabel.MatchString(ns) || !dnsLabel.MatchString(name) {
		http.NotFound(w, r)
		return
	}
	env, err := s.Store.Attestation(r.Context(), Key{Namespace: ns, Run: name, Attempt: n})
	if s.storeError(w, r, err) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(env)
}

// servePublicKey serves the key the attestations verify with, as a file
// for cosign --key.
func (s *Server) servePublicKey(w http.ResponseWriter, r *http.Request, _ grant) {
	k, err := s.signingKey(r.Context(), r.PathValue("ns"), r.PathValue("name"))
	switch {
	case err != nil:
		s.Log.Error(err, "reading the attestation key")
		http.Error(w, "the attestation key cannot be read; try again shortly", http.StatusServiceUnavailable)
	case k.PublicKey == "":
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(k.PublicKey))
	}
}

// serveBlob serves an artifact only through a run whose bundle names it.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, _ grant) {
	ns, name, digest := r.PathValue("ns"), r.PathValue("name"), r.PathValue("digest")
	if !dnsLabel.MatchString(ns) || !dnsLabel.MatchString(name) || !hexDigest.MatchString(digest) {
		http.NotFound(w, r)
		return
	}
	bundles, err := s.bundles(r.Context(), ns, name)
	if s.storeError(w, r, err) {
		return
	}
	named := slices.ContainsFunc(bundles, func(l *Loaded) bool {
		return slices.ContainsFunc(l.Manifest.Artifacts, func(a Artifact) bool { return a.SHA256 == digest })
	})
	if !named {
		http.NotFound(w, r)
		return
	}
	data, err := s.Store.Blob(r.Context(), digest)
	if s.storeError(w, r, err) {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrNotFound):
		http.NotFound(w, r)
	default:
		s.Log.Error(err, "reading the evidence store", "path", r.URL.Path)
		http.Error(w, "the evidence store did not answer; try again shortly", http.StatusServiceUnavailable)
	}
	return true
}

func short(s string) string {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// pct is a span's share of the whole timeline, at least a sliver so every
// phase stays visible.
func pct(secs float64, spans []TimelineEntry) float64 {
	var total float64
	for _, s := range spans {
		total += s.Seconds
	}
	if total <= 0 {
		return 100 / float64(max(1, len(spans)))
	}
	return max(4, 100*secs/total)
}

// Stylesheet is the evidence page's stylesheet, which TauGrid's other
// pages (the team board) share.
func Stylesheet() template.CSS { return pageCSS() }
