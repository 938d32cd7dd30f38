package gitsource

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// MaxWebhookBody is the largest webhook body read, as Flux's receiver.
const MaxWebhookBody = 3 << 20

// Receiver is one repository's webhook endpoint.
type Receiver struct {
	Forge Forge
	// RepoURL is the repository's URL, for the logs.
	RepoURL string
	// Namespace and Name are the TauRepository to nudge: this receiver's
	// own, never another with the same URL (another team's, say).
	Namespace, Name string
	// Secret is the webhook secret configured on the forge. A receiver
	// without one refuses every request.
	Secret []byte
}

// Receivers finds the receiver served at /<prefix>/<id>, where id is an
// unguessable name (see WebhookID). It returns an error matching
// ErrNotFound when there is none.
type Receivers interface {
	Receiver(ctx context.Context, id string) (Receiver, error)
}

// Nudger asks for a repository to be polled now. The reconciler implements
// it by patching an annotation on the TauRepository, so the request
// survives a restart.
type Nudger interface {
	Nudge(ctx context.Context, rcv Receiver) error
}

// WebhookID is the path element a repository's receiver is served at:
// derived from the secret, so knowing a repository's name is not enough to
// find its endpoint.
func WebhookID(namespace, name string, secret []byte) string {
	return hashString(namespace, name, string(secret))
}

// WebhookOptions tune a WebhookHandler.
type WebhookOptions struct {
	// Clock ages remembered deliveries. Default: the real clock.
	Clock clock.PassiveClock
	// Log records refused and failed deliveries, never secrets.
	Log logr.Logger
	// Deliveries is how many delivery IDs are remembered to drop
	// redeliveries. Default 10,000.
	Deliveries int
	// DeliveryTTL is how long one is remembered. Default 1 hour.
	DeliveryTTL time.Duration
	// ClientRefusals and ClientBurst limit the refused requests: past the
	// burst, a client is answered 429 instead of 404 (an unknown receiver)
	// and, separately for each receiver, instead of 401 or 400 (a wrong
	// signature, an unreadable body), until it earns budget back at
	// ClientRefusals per second. A delivery the receiver's secret verifies
	// is never limited. Defaults DefaultClientRefusals and
	// DefaultClientBurst.
	ClientRefusals rate.Limit
	ClientBurst    int
	// TrustedProxies are the proxies (an Ingress controller's pods, a load
	// balancer) whose X-Forwarded-For names the client: for a connection
	// from one of them, the client is the address nearest the end of that
	// header that is not itself a trusted proxy. Any other connection's
	// X-Forwarded-For is ignored, as anyone can write one.
	TrustedProxies []netip.Prefix
	// ClientKey names the client of a request. Default: the connection's
	// address, or the forwarded one from TrustedProxies (ClientAddress).
	ClientKey func(*http.Request) string
	// ReceiverTTL is how long a receiver looked up is kept, so that
	// requests at a known receiver, verified or not, cost its Secret one
	// read per TTL. Default 10 seconds.
	ReceiverTTL time.Duration
}

// WebhookHandler turns signed push and tag events from GitHub, GitLab and
// Gitea/Forgejo into nudges. It answers:
//
//	202 a nudge was recorded, 200 a ping, a redelivery or an event that
//	    changes no refs, 400 a signed body that does not parse or a body
//	    that cannot be read, 401 a missing or wrong signature, 404 an
//	    unknown receiver, 405 not a POST, 413 a body over 3 MiB, 429 a
//	    client past its budget of refused requests (per receiver for 401
//	    and 400), 503 the nudge failed.
//
// Behind an Ingress every request may come from one address; strangers'
// refused requests then spend a budget the forge shares, but never block
// it: a delivery whose signature verifies is served whatever its client
// spent.
type WebhookHandler struct {
	receivers  *receiverCache
	nudger     Nudger
	log        logr.Logger
	deliveries *deliveries
	limits     *clientLimits
	clientKey  func(*http.Request) string
}

// NewWebhookHandler builds a handler; serve it under a pattern whose last
// path element is the receiver ID, e.g. "POST /hooks/{id}".
func NewWebhookHandler(rs Receivers, n Nudger, opts WebhookOptions) *WebhookHandler {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Deliveries <= 0 {
		opts.Deliveries = 10_000
	}
	if opts.DeliveryTTL <= 0 {
		opts.DeliveryTTL = time.Hour
	}
	if opts.ClientRefusals <= 0 {
		opts.ClientRefusals = DefaultClientRefusals
	}
	if opts.ClientBurst <= 0 {
		opts.ClientBurst = DefaultClientBurst
	}
	if opts.ReceiverTTL <= 0 {
		opts.ReceiverTTL = DefaultReceiverTTL
	}
	if opts.ClientKey == nil {
		proxies := opts.TrustedProxies
		opts.ClientKey = func(r *http.Request) string { return ClientAddress(r, proxies) }
	}
	return &WebhookHandler{receivers: newReceiverCache(rs, opts.ReceiverTTL, opts.Clock), nudger: n, log: opts.Log,
		deliveries: newDeliveries(opts.Deliveries, opts.DeliveryTTL, opts.Clock),
		limits:     newClientLimits(opts.ClientRefusals, opts.ClientBurst, opts.Clock), clientKey: opts.ClientKey}
}

// NewWebhookServer wraps a handler in an http.Server with the header and
// read limits a public endpoint needs.
func NewWebhookServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    256 << 10,
	}
}

// ServeHTTP implements http.Handler. The receiver is looked up before the
// body is read, so a stranger guessing IDs costs a cache lookup, not 3 MiB.
func (h *WebhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	client := h.clientKey(r)
	id := path.Base(r.URL.Path)
	rcv, err := h.receivers.Receiver(r.Context(), id)
	if errors.Is(err, ErrNotFound) || (err == nil && id == "") {
		h.refuse(w, client, http.StatusNotFound, "not found")
		return
	}
	if err != nil {
		h.log.Error(err, "looking up webhook receiver")
		reply(w, http.StatusServiceUnavailable, "try again later")
		return
	}
	// Refusals at a known receiver spend a budget of that receiver's for
	// the client: one receiver's strangers never limit another's forge.
	perReceiver := id + "\x00" + client
	body, status := readBody(w, r)
	switch {
	case status == http.StatusBadRequest:
		h.refuse(w, perReceiver, status, http.StatusText(status))
		return
	case status != 0:
		reply(w, status, http.StatusText(status))
		return
	}
	if !authentic(rcv, r.Header, body) {
		h.log.Info("refused a webhook with a missing or wrong signature", "forge", rcv.Forge, "repository", redactURL(rcv.RepoURL))
		h.refuse(w, perReceiver, http.StatusUnauthorized, "missing or wrong signature")
		return
	}
	h.serve(w, r, id, rcv, body)
}

// refuse answers status, or 429 when key has spent its refusals, and
// charges key one.
func (h *WebhookHandler) refuse(w http.ResponseWriter, key string, status int, msg string) {
	if h.limits.spent(key) {
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusTooManyRequests, "too many refused requests; try again later")
		return
	}
	h.limits.refused(key)
	reply(w, status, msg)
}

func (h *WebhookHandler) serve(w http.ResponseWriter, r *http.Request, id string, rcv Receiver, body []byte) {
	log := h.log.WithValues("forge", rcv.Forge, "repository", redactURL(rcv.RepoURL))
	event := eventName(rcv.Forge, r.Header)
	ev, handled, err := ParseWebhook(rcv.Forge, event, body)
	switch {
	case err != nil:
		log.Info("refused a malformed webhook", "event", truncate(event, 64), "error", err.Error())
		reply(w, http.StatusBadRequest, err.Error())
		return
	case !handled:
		reply(w, http.StatusOK, "ignored")
		return
	}
	delivery := deliveryID(rcv.Forge, r.Header)
	key := id + "\x00" + delivery
	if delivery == "" {
		key = "" // nothing to tell a redelivery by: always nudge
	}
	if !h.deliveries.begin(key) {
		reply(w, http.StatusOK, "duplicate delivery")
		return
	}
	if err := h.nudger.Nudge(r.Context(), rcv); err != nil {
		h.deliveries.abort(key)
		log.Error(err, "recording a webhook nudge failed", "ref", ev.Ref)
		reply(w, http.StatusServiceUnavailable, "try again later")
		return
	}
	reply(w, http.StatusAccepted, "poll requested")
}

func reply(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// readBody reads at most MaxWebhookBody bytes; status is non-zero when the
// body is refused.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, int) {
	if r.ContentLength > MaxWebhookBody {
		return nil, http.StatusRequestEntityTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge
	case err != nil:
		return nil, http.StatusBadRequest
	}
	return body, 0
}

// authentic checks the forge's signature in constant time.
func authentic(rcv Receiver, hdr http.Header, body []byte) bool {
	if len(rcv.Secret) == 0 {
		return false
	}
	switch rcv.Forge {
	case ForgeGitHub:
		sig, ok := strings.CutPrefix(hdr.Get("X-Hub-Signature-256"), "sha256=")
		return ok && hmacMatches(rcv.Secret, body, sig)
	case ForgeGitea:
		sig := hdr.Get("X-Gitea-Signature")
		if sig == "" {
			sig = hdr.Get("X-Forgejo-Signature")
		}
		return hmacMatches(rcv.Secret, body, sig)
	case ForgeGitLab:
		token := hdr.Get("X-Gitlab-Token")
		return token != "" && subtle.ConstantTimeCompare([]byte(token), rcv.Secret) == 1
	}
	return false
}

func hmacMatches(secret, body []byte, sigHex string) bool {
	got, err := hex.DecodeString(sigHex)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), got)
}

func eventName(f Forge, hdr http.Header) string {
	switch f {
	case ForgeGitHub:
		return hdr.Get("X-GitHub-Event")
	case ForgeGitLab:
		return hdr.Get("X-Gitlab-Event")
	case ForgeGitea:
		if e := hdr.Get("X-Gitea-Event"); e != "" {
			return e
		}
		return hdr.Get("X-Forgejo-Event")
	}
	return ""
}

// deliveryID is the forge's ID of one delivery, the same on redelivery;
// empty when the forge sent none.
func deliveryID(f Forge, hdr http.Header) string {
	var names []string
	switch f {
	case ForgeGitHub:
		names = []string{"X-GitHub-Delivery"}
	case ForgeGitLab:
		names = []string{"X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"}
	case ForgeGitea:
		names = []string{"X-Gitea-Delivery", "X-Forgejo-Delivery"}
	}
	for _, n := range names {
		if v := hdr.Get(n); v != "" {
			return truncate(v, 128)
		}
	}
	return ""
}

// redactURL drops credentials from a URL for logs.
func redactURL(u string) string {
	clean, _, _ := splitUserinfo(u)
	return clean
}
