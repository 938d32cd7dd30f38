package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/board"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/runs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Secrets in tenant namespaces are read through the platform's SecretsGrant.
// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=secrets,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list
// +kubebuilder:rbac:groups=taugrid.dev,resources=taurepositories,verbs=get;list;watch;patch

// Tenant API tokens are Secrets in the controller's namespace with this
// label; each holds a token and the namespace it reads.
const (
	apiTokenCacheTime = 10 * time.Second
	apiMaxLogTail     = 10000
	// DefaultMaxFollows is how many logs one token may follow at once.
	DefaultMaxFollows = 4
)

// Tokens maps bearer tokens to the tenant namespace they may read. Only
// digests are kept in memory, and compared in constant time.
type Tokens struct {
	// Reader reads Secrets; an uncached reader keeps Secrets out of the
	// informer cache.
	Reader    client.Reader
	Namespace string
	Clock     clock.PassiveClock

	mu     sync.Mutex
	loaded time.Time
	tokens []apiToken
}

type apiToken struct {
	digest    [32]byte
	namespace string
}

// NamespaceOf returns the namespace a token reads, or "" for a token that is
// not one.
func (t *Tokens) NamespaceOf(ctx context.Context, token string) (string, error) {
	if token == "" {
		return "", nil
	}
	return t.namespaceOfDigest(ctx, sha256.Sum256([]byte(token)))
}

// namespaceOfDigest is NamespaceOf for the token whose SHA-256 is d.
func (t *Tokens) namespaceOfDigest(ctx context.Context, d [32]byte) (string, error) {
	tokens, err := t.load(ctx)
	if err != nil {
		return "", err
	}
	ns := ""
	for _, tk := range tokens {
		if subtle.ConstantTimeCompare(d[:], tk.digest[:]) == 1 {
			ns = tk.namespace
		}
	}
	return ns, nil
}

func (t *Tokens) load(ctx context.Context) ([]apiToken, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := t.Clock.Now(); now.Sub(t.loaded) < apiTokenCacheTime && t.tokens != nil {
		return t.tokens, nil
	}
	var secrets corev1.SecretList
	if err := t.Reader.List(ctx, &secrets, client.InNamespace(t.Namespace), client.MatchingLabels{taugridv1.LabelAPIToken: "true"}); err != nil {
		return nil, fmt.Errorf("reading API tokens: %w", err)
	}
	tokens := []apiToken{}
	for _, s := range secrets.Items {
		tok, ns := s.Data[taugridv1.APITokenKey], string(s.Data[taugridv1.APINamespaceKey])
		if len(tok) == 0 || ns == "" {
			continue
		}
		tokens = append(tokens, apiToken{digest: sha256.Sum256(tok), namespace: ns})
	}
	t.tokens, t.loaded = tokens, t.Clock.Now()
	return tokens, nil
}

// RepositoryNudger asks for an immediate poll of one repository, unless it
// was asked less than spacing ago.
type RepositoryNudger interface {
	NudgeRepository(ctx context.Context, namespace, name string, spacing time.Duration) error
}

// RunsAPI is the controller's HTTP API for researchers, who need no
// Kubernetes credentials: their team's runs, a run's logs and diagnosis,
// and a nudge that makes a pushed run ref show up at once. Each request
// carries a tenant's bearer token and reads that tenant's namespace only.
//
//	GET  /api/v1/namespaces/{ns}/runs
//	GET  /api/v1/namespaces/{ns}/runs/{run}
//	GET  /api/v1/namespaces/{ns}/runs/{run}/logs?follow=true&tail=100
//	GET  /api/v1/namespaces/{ns}/runs/{run}/diagnosis
//	GET  /api/v1/namespaces/{ns}/queue
//	GET  /api/v1/namespaces/{ns}/audit?after=0&limit=500  the team's audit log
//	POST /api/v1/namespaces/{ns}/nudge  {"repository": "<clone URL>"}
//	GET  /api/v1/whoami                  the token's namespace
type RunsAPI struct {
	// Client reads runs, pods and Kueue objects (the manager's cache);
	// APIReader reads Secrets and events around it.
	Client    client.Reader
	APIReader client.Reader
	Logs      runs.LogSource
	// Clusters reads the pods of runs dispatched to MultiKueue workers;
	// nil: every run's pods are the local cluster's.
	Clusters clusters.Locator
	Tokens   *Tokens
	Nudger   RepositoryNudger
	// Audit reads the tenants' audit logs; nil: none is kept.
	Audit evidence.AuditStore
	// Log records why a request failed on the controller's side (5xx);
	// the zero Logger discards.
	Log logr.Logger
	// MaxFollows bounds the logs one token follows at once (each holds a
	// stream from the API server); 0 means DefaultMaxFollows.
	MaxFollows int
	// Clock is what the queue's start estimates count from; nil: the
	// real clock.
	Clock clock.PassiveClock
	// Board, when set, serves the team board at /teams/{ns} and its
	// sign-in at /login (board.go).
	Board *board.Handler

	sessions sessions

	follows follows
}

// follows counts the open log follows of each token, by its digest.
type follows struct {
	mu   sync.Mutex
	open map[[32]byte]int
}

// acquire takes one of limit follows for token; release gives it back.
func (f *follows) acquire(token string, limit int) (release func(), ok bool) {
	key := sha256.Sum256([]byte(token))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open[key] >= limit {
		return nil, false
	}
	if f.open == nil {
		f.open = map[[32]byte]int{}
	}
	f.open[key]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.open[key]--; f.open[key] <= 0 {
			delete(f.open, key)
		}
	}, true
}

// Handler is the API's HTTP handler.
func (a *RunsAPI) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/runs", a.tenant(a.list))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/runs/{run}", a.tenant(a.get))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/runs/{run}/logs", a.tenant(a.logs))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/runs/{run}/diagnosis", a.tenant(a.diagnosis))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/queue", a.tenant(a.queue))
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/audit", a.tenant(a.audit))
	mux.HandleFunc("POST /api/v1/namespaces/{ns}/nudge", a.tenant(a.nudge))
	mux.HandleFunc("GET /api/v1/whoami", a.whoami)
	if a.Board != nil {
		a.boardRoutes(mux)
	}
	return mux
}

func (a *RunsAPI) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// whoami names the namespace of the request's token.
func (a *RunsAPI) whoami(w http.ResponseWriter, r *http.Request) {
	if ns, ok := a.authenticate(w, r); ok {
		writeJSON(w, runs.Identity{SchemaVersion: 1, Namespace: ns})
	}
}

// authenticate is the namespace the request's bearer token reads; it
// answers the request itself when there is none.
func (a *RunsAPI) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	token := bearer(r)
	if token == "" {
		apiError(w, http.StatusUnauthorized, "missing bearer token: run tau login --api-url <this API> with your team's API token (or set TAU_TOKEN)")
		return "", false
	}
	ns, err := a.Tokens.NamespaceOf(r.Context(), token)
	switch {
	case err != nil:
		a.failed(w, r, http.StatusServiceUnavailable, "cannot check tokens now; try again", err)
	case ns == "":
		apiError(w, http.StatusUnauthorized, "invalid token")
	default:
		return ns, true
	}
	return "", false
}

// tenant authenticates the request's token for the path's namespace.
func (a *RunsAPI) tenant(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, ok := a.authenticate(w, r)
		switch {
		case !ok:
		case ns == taugridv1.APIPlatformAdmin: // the platform team reads every team's
			if errs := validation.IsDNS1123Label(r.PathValue("ns")); len(errs) > 0 {
				apiError(w, http.StatusBadRequest, "the path's namespace is not a namespace's name: "+errs[0])
				return
			}
			h(w, r, r.PathValue("ns"))
		case ns != r.PathValue("ns"):
			apiError(w, http.StatusForbidden, fmt.Sprintf("this token reads namespace %s, not %s", ns, r.PathValue("ns")))
		default:
			h(w, r, ns)
		}
	}
}

func (a *RunsAPI) list(w http.ResponseWriter, r *http.Request, ns string) {
	var list taugridv1.TauRunList
	if err := a.Client.List(r.Context(), &list, client.InNamespace(ns)); err != nil {
		a.failed(w, r, http.StatusInternalServerError, "listing runs failed", err)
		return
	}
	runs.SortNewestFirst(list.Items)
	for i := range list.Items {
		list.Items[i].ManagedFields = nil
	}
	writeJSON(w, map[string]any{"schema_version": 1, "runs": list.Items})
}

func (a *RunsAPI) find(w http.ResponseWriter, r *http.Request, ns string) *taugridv1.TauRun {
	run, err := runs.FindRun(r.Context(), a.Client, ns, r.PathValue("run"))
	var none *runs.ErrNoRun
	switch {
	case errors.As(err, &none):
		apiError(w, http.StatusNotFound, err.Error())
	case err != nil:
		a.failed(w, r, http.StatusInternalServerError, "reading the run failed", err)
	}
	if err != nil {
		return nil
	}
	run.ManagedFields = nil
	return run
}

func (a *RunsAPI) queue(w http.ResponseWriter, r *http.Request, ns string) {
	rep, err := runs.ReportQueueAt(r.Context(), a.Client, ns, a.now())
	if err != nil {
		a.failed(w, r, http.StatusInternalServerError, "reading the queues failed", err)
		return
	}
	writeJSON(w, rep)
}

func (a *RunsAPI) get(w http.ResponseWriter, r *http.Request, ns string) {
	if run := a.find(w, r, ns); run != nil {
		writeJSON(w, run)
	}
}

func (a *RunsAPI) diagnosis(w http.ResponseWriter, r *http.Request, ns string) {
	run := a.find(w, r, ns)
	if run == nil {
		return
	}
	d, err := a.Diagnosis(r.Context(), run)
	if err != nil {
		a.failed(w, r, http.StatusInternalServerError, "diagnosing the run failed", err)
		return
	}
	writeJSON(w, d)
}

func (a *RunsAPI) reader() client.Reader {
	if a.APIReader != nil {
		return a.APIReader
	}
	return a.Client
}

// logs streams the current attempt's first pod's log (rank 0, or the Ray
// head), masked, following it with follow=true until the pod ends or the
// client goes away.
func (a *RunsAPI) logs(w http.ResponseWriter, r *http.Request, ns string) {
	run := a.find(w, r, ns)
	if run == nil {
		return
	}
	pod, err := a.AttemptPod(r.Context(), run)
	if err != nil {
		a.failed(w, r, http.StatusInternalServerError, "listing the run's pods failed", err)
		return
	}
	if pod == nil {
		apiError(w, http.StatusNotFound, fmt.Sprintf("run %s has no pod yet (%s)", r.PathValue("run"), strings.ToLower(string(run.Status.Phase))))
		return
	}
	opts := &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name, Follow: r.URL.Query().Get("follow") == "true"}
	if t := r.URL.Query().Get("tail"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 || n > apiMaxLogTail {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("tail: want a number of lines from 0 to %d", apiMaxLogTail))
			return
		}
		opts.TailLines = &n
	}
	if opts.Follow {
		release, ok := a.followSlot(w, r)
		if !ok {
			return
		}
		defer release()
	}
	// The pod reads the Secrets of the cluster it runs on: a worker's for
	// a dispatched run, and those are the values to mask.
	rd, logs, err := a.runReader(r.Context(), run, a.reader())
	if err != nil {
		a.failed(w, r, http.StatusBadGateway, "the run's cluster is not reachable", err)
		return
	}
	mask, err := runs.SecretMasker(r.Context(), rd, ns, []corev1.Pod{*pod})
	if err != nil {
		a.failed(w, r, http.StatusForbidden, "the log is withheld: "+err.Error()+"; ask your platform team to let TauGrid read it", err)
		return
	}
	rc, err := logs.Logs(r.Context(), ns, pod.Name, opts)
	if err != nil {
		a.failed(w, r, http.StatusBadGateway, "the pod's log is not available: "+mask.Mask(err.Error()), errors.New(mask.Mask(err.Error())))
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Tau-Pod", pod.Name)
	out := streamResponse(w)
	if opts.Follow {
		out.Flush() // the answer starts now, not with the pod's next line
	}
	_ = runs.CopyMasked(out, rc, mask)
}

// followSlot takes one of the request's token's follows, or answers 429.
func (a *RunsAPI) followSlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	limit := cmp.Or(a.MaxFollows, DefaultMaxFollows)
	if release, ok = a.follows.acquire(bearer(r), limit); !ok {
		w.Header().Set("Retry-After", "10")
		apiError(w, http.StatusTooManyRequests, fmt.Sprintf("this token already follows %d logs, the most it may follow at once: stop one and try again", limit))
	}
	return release, ok
}

// bearer is the request's bearer token, "" without one (another scheme
// is none).
func bearer(r *http.Request) string {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(token)
}

func (a *RunsAPI) nudge(w http.ResponseWriter, r *http.Request, ns string) {
	var body struct {
		Repository string `json:"repository"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil || body.Repository == "" {
		apiError(w, http.StatusBadRequest, `want {"repository": "<clone URL>"}`)
		return
	}
	// Only the tenant's own repositories are polled.
	var repos taugridv1.TauRepositoryList
	if err := a.Client.List(r.Context(), &repos, client.InNamespace(ns)); err != nil {
		a.failed(w, r, http.StatusInternalServerError, "listing repositories failed", err)
		return
	}
	// A token's nudges cost each of its repositories at most one poll per
	// interval: more pushes in between are seen by that poll or the next.
	found := false
	for _, repo := range repos.Items {
		if !SameRepository(repo.Spec.URL, body.Repository) {
			continue
		}
		found = true
		if err := a.Nudger.NudgeRepository(r.Context(), repo.Namespace, repo.Name, repo.Spec.Interval.Duration); err != nil {
			a.failed(w, r, http.StatusInternalServerError, "nudging failed", err)
			return
		}
	}
	if found {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	apiError(w, http.StatusNotFound, fmt.Sprintf("namespace %s has no TauRepository for %s", ns, body.Repository))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// failed answers a request the API could not serve, and logs why: the
// client reads only msg, the controller's log keeps err.
func (a *RunsAPI) failed(w http.ResponseWriter, r *http.Request, code int, msg string, err error) {
	a.Log.Error(err, msg, "method", r.Method, "path", r.URL.Path, "status", code)
	apiError(w, code, msg)
}

func apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// SameRepository reports whether two clone URLs name the same repository,
// whatever the transport: https://host/org/repo(.git), ssh://git@host/org/repo
// and git@host:org/repo are one repository.
func SameRepository(a, b string) bool { return repoKey(a) == repoKey(b) }

func repoKey(u string) string {
	u = strings.TrimSpace(u)
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	} else if host, path, ok := strings.Cut(u, ":"); ok && !strings.Contains(host, "/") {
		u = host + "/" + path // scp-like git@host:org/repo
	}
	if at := strings.Index(u, "@"); at >= 0 && at < strings.Index(u+"/", "/") {
		u = u[at+1:] // user and password
	}
	host, path, _ := strings.Cut(u, "/")
	if h, port, ok := strings.Cut(host, ":"); ok && (port == "22" || port == "443" || port == "80") {
		host = h
	}
	path = strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git")
	return strings.ToLower(host) + "/" + path
}
