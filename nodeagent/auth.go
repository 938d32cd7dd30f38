package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// GuardConfig bounds what the Guard asks of the API server. Its decisions
// are cached, so a caller scraping every few seconds costs one review per
// AllowTTL; reviews of tokens not in the cache are rate-limited, so a flood
// of made-up tokens costs the API server at most ReviewsPerSecond (plus
// ReviewBurst), never one review per request.
type GuardConfig struct {
	// AllowTTL is how long an admitted token is admitted without asking
	// again; DenyTTL how long a refused one is refused.
	AllowTTL, DenyTTL time.Duration
	// AllowEntries and DenyEntries cap the two caches (least recently
	// used first out). They are apart so that refused tokens, which anyone
	// can make up, never evict an admitted one.
	AllowEntries, DenyEntries int
	// ReviewsPerSecond and ReviewBurst limit reviews of tokens not in the
	// cache; MaxInFlight limits those under way at once. A request beyond
	// either is answered 429 without asking the API server.
	ReviewsPerSecond float64
	ReviewBurst      int
	MaxInFlight      int
	// Timeout bounds one review (TokenReview and SubjectAccessReview).
	Timeout time.Duration
}

// DefaultGuardConfig is the DaemonSet's: an agent's callers are the
// controller (once a minute) and Prometheus (every 30 s by default).
func DefaultGuardConfig() GuardConfig {
	return GuardConfig{
		AllowTTL: 30 * time.Second, DenyTTL: 10 * time.Second,
		AllowEntries: 64, DenyEntries: 1024,
		ReviewsPerSecond: 2, ReviewBurst: 10, MaxInFlight: 4,
		Timeout: 10 * time.Second,
	}
}

// Guard admits to what it wraps only the callers the cluster vouches for,
// as kube-rbac-proxy and metrics-server do: a bearer token the API server's
// TokenReview authenticates, whose user a SubjectAccessReview allows the
// request's verb on the request's path (a non-resource URL: the chart's
// ClusterRoles grant get on /gpus to the controller and on /metrics to
// Prometheus). Tenants' pods share the network with the agent: without
// this, any of them could read which pods of every namespace hold the
// node's GPUs, and how hard they use them.
//
// Tokens are never kept, logged or echoed: the caches are keyed by a
// SHA-256 of the token, verb and path.
type Guard struct {
	kube    kubernetes.Interface
	cfg     GuardConfig
	clock   clock.PassiveClock
	allowed *lru.Cache // key -> cached
	denied  *lru.Cache // key -> cached
	limit   *rate.Limiter
	slots   chan struct{}
	flight  singleflight.Group
	answers *prometheus.CounterVec
}

// MetricAuthAnswers counts the Guard's answers, by result and by whether the
// API server was asked.
const MetricAuthAnswers = "taugrid_nodeagent_auth_answers_total"

// NewGuard builds a Guard reviewing with kube. clk nil: the real clock;
// reg nil: its counter is not exported.
func NewGuard(kube kubernetes.Interface, cfg GuardConfig, clk clock.PassiveClock, reg prometheus.Registerer) *Guard {
	if clk == nil {
		clk = clock.RealClock{}
	}
	g := &Guard{
		kube: kube, cfg: cfg, clock: clk,
		allowed: lru.New(cfg.AllowEntries),
		denied:  lru.New(cfg.DenyEntries),
		limit:   rate.NewLimiter(rate.Limit(cfg.ReviewsPerSecond), cfg.ReviewBurst),
		slots:   make(chan struct{}, cfg.MaxInFlight),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAuthAnswers,
			Help: "Answers to requests for /gpus and /metrics: allowed, unauthenticated, forbidden, throttled or error; reviewed is false when the answer came from the cache."},
			[]string{"result", "reviewed"}),
	}
	if reg != nil {
		reg.MustRegister(g.answers)
	}
	return g
}

// Require serves next only to a caller the cluster vouches for, with a
// token for audience ("": the API server's own, as a pod's default token
// is), and allows; others get 401 (no token, one the cluster does not know
// or one for another audience), 403 (the SubjectAccessReview said no), 429
// (too many unknown tokens at once) or 503 (the API server could not be
// asked).
func (g *Guard) Require(audience string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := g.decide(r, audience)
		if d.code == http.StatusOK {
			next.ServeHTTP(w, r)
			return
		}
		switch d.code {
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="tau-nodeagent"`)
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, "tau-nodeagent: "+d.message, d.code)
	})
}

// decision is the answer to one token, verb and path: code 200 admits.
type decision struct {
	code    int
	message string
	result  string // the counter's label
}

// cached is a decision and when it stops holding.
type cached struct {
	decision
	expires time.Time
}

// access is what a request asks to do, as a SubjectAccessReview says it,
// and the audience its token must be for.
type access struct{ verb, path, audience string }

func accessOf(r *http.Request, audience string) access {
	return access{verb: verbOf(r.Method), path: r.URL.Path, audience: audience}
}

// verbOf is the API server's verb for an HTTP method on a non-resource URL.
func verbOf(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	}
	return strings.ToLower(method)
}

// decide runs the checks in order: a bearer token, the cache, the bound on
// reviews, the reviews.
func (g *Guard) decide(r *http.Request, audience string) decision {
	a := accessOf(r, audience)
	token, ok := bearerToken(r)
	if !ok {
		return g.count(decision{http.StatusUnauthorized, fmt.Sprintf(
			"%s needs a ServiceAccount token the cluster vouches for: send it as Authorization: Bearer <token>", a.path), "unauthenticated"}, false)
	}
	key := keyOf(token, a)
	d, renewal, ok := g.lookup(key, g.clock.Now())
	if ok {
		return g.count(d, false)
	}
	// Requests with one token at once share one review.
	v, _, _ := g.flight.Do(key, func() (any, error) {
		return g.reviewOnce(context.WithoutCancel(r.Context()), key, token, a, renewal), nil
	})
	o := v.(outcome)
	return g.count(o.decision, o.reviewed)
}

// outcome is a decision and whether the API server was asked for it.
type outcome struct {
	decision
	reviewed bool
}

// reviewOnce reviews token for a, unless the bound on reviews is spent, and
// caches the answer.
func (g *Guard) reviewOnce(ctx context.Context, key, token string, a access, renewal bool) outcome {
	if d, _, ok := g.lookup(key, g.clock.Now()); ok { // another request's review, just done
		return outcome{d, false}
	}
	release, ok := g.admitReview(renewal)
	if !ok {
		return outcome{decision{http.StatusTooManyRequests, "too many tokens to check at once: try again shortly", "throttled"}, false}
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	d := g.review(ctx, token, a)
	g.remember(key, d)
	return outcome{d, true}
}

func (g *Guard) count(d decision, reviewed bool) decision {
	g.answers.WithLabelValues(d.result, strconv.FormatBool(reviewed)).Inc()
	return d
}

// bearerToken is the request's bearer token, if it has one.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// keyOf is the cache key of a token asking for a: a hash, so that neither
// the caches nor a heap dump hold a token.
func keyOf(token string, a access) string {
	sum := sha256.Sum256([]byte(a.verb + "\x00" + a.path + "\x00" + a.audience + "\x00" + token))
	return hex.EncodeToString(sum[:])
}

// lookup is the cached decision for key, if one holds at now. renewal says
// the key was admitted before and its admission has lapsed: a caller the
// cluster vouched for, whose review the bound on unknown tokens must not
// starve (a flood of made-up tokens would otherwise lock the controller out).
func (g *Guard) lookup(key string, now time.Time) (d decision, renewal, ok bool) {
	if v, found := g.allowed.Get(key); found {
		c := v.(cached)
		if now.Before(c.expires) {
			return c.decision, false, true
		}
		renewal = true
	}
	if v, found := g.denied.Get(key); found {
		c := v.(cached)
		if now.Before(c.expires) {
			return c.decision, false, true
		}
	}
	return decision{}, renewal, false
}

// remember caches a decision of the API server; an error is not one.
func (g *Guard) remember(key string, d decision) {
	now := g.clock.Now()
	switch d.code {
	case http.StatusOK:
		g.denied.Remove(key)
		g.allowed.Add(key, cached{d, now.Add(g.cfg.AllowTTL)})
	case http.StatusUnauthorized, http.StatusForbidden:
		g.allowed.Remove(key)
		g.denied.Add(key, cached{d, now.Add(g.cfg.DenyTTL)})
	}
}

// admitReview takes a slot and a token of the rate limit for one review; ok
// false when either is spent. A renewal needs neither: only tokens admitted
// before are renewed, at most AllowEntries per AllowTTL.
func (g *Guard) admitReview(renewal bool) (release func(), ok bool) {
	if renewal {
		return func() {}, true
	}
	select {
	case g.slots <- struct{}{}:
	default:
		return nil, false
	}
	if !g.limit.AllowN(g.clock.Now(), 1) {
		<-g.slots
		return nil, false
	}
	return func() { <-g.slots }, true
}

// review asks the API server who the token is (TokenReview, for a's
// audience, or the API server's own, as a Pod's ServiceAccount token is)
// and whether that user may do a (SubjectAccessReview).
func (g *Guard) review(ctx context.Context, token string, a access) decision {
	spec := authenticationv1.TokenReviewSpec{Token: token}
	if a.audience != "" {
		spec.Audiences = []string{a.audience}
	}
	tr, err := g.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return decision{http.StatusServiceUnavailable, "the token could not be checked now (TokenReview failed): try again shortly", "error"}
	}
	if !tr.Status.Authenticated {
		return decision{http.StatusUnauthorized, fmt.Sprintf(
			"the cluster does not vouch for this token (TokenReview): %s needs a valid ServiceAccount token%s", a.path, forAudience(a)), "unauthenticated"}
	}
	// The API server answers for the audiences asked; one that ignored
	// them must not turn a token for itself into one for the agents.
	if a.audience != "" && !slices.Contains(tr.Status.Audiences, a.audience) {
		return decision{http.StatusUnauthorized, fmt.Sprintf(
			"the cluster did not vouch for this token for the agents (TokenReview): %s needs a ServiceAccount token%s", a.path, forAudience(a)), "unauthenticated"}
	}
	u := tr.Status.User
	sar, err := g.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extraOf(u.Extra),
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: a.path, Verb: a.verb},
		}}, metav1.CreateOptions{})
	if err != nil {
		return decision{http.StatusServiceUnavailable, "the caller's access could not be checked now (SubjectAccessReview failed): try again shortly", "error"}
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return decision{http.StatusForbidden, fmt.Sprintf(
			"%q may not %s %s: it needs a ClusterRole granting nonResourceURLs [%q] verbs [%q]", u.Username, a.verb, a.path, a.path, a.verb), "forbidden"}
	}
	return decision{http.StatusOK, "", "allowed"}
}

// forAudience says which audience a's token must be for, if not the API
// server's.
func forAudience(a access) string {
	if a.audience == "" {
		return ""
	}
	return " for audience " + a.audience
}

func extraOf(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}
