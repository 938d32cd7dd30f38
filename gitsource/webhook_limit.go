package gitsource

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Defaults of the per-client limit on refused webhook requests.
const (
	// DefaultClientRefusals is how many refused requests per second a
	// client earns back.
	DefaultClientRefusals = rate.Limit(1)
	// DefaultClientBurst is how many refused requests a client may make at
	// once before it is answered 429.
	DefaultClientBurst = 20
	// maxLimitedClients bounds the clients remembered; past it, clients
	// whose budget is whole again are forgotten.
	maxLimitedClients = 10_000
)

// clientLimits bounds the refused requests (unknown receiver, wrong
// signature, malformed body) each client may make. A forge's real
// deliveries are never refused, so they never spend the budget; a stranger
// probing receiver IDs or a known ID with guessed signatures is answered
// 429 before anything is looked up, once its budget is spent.
type clientLimits struct {
	every rate.Limit
	burst int
	clock clock.PassiveClock

	mu       sync.Mutex
	byClient map[string]*rate.Limiter
}

func newClientLimits(every rate.Limit, burst int, clk clock.PassiveClock) *clientLimits {
	return &clientLimits{every: every, burst: burst, clock: clk, byClient: map[string]*rate.Limiter{}}
}

// spent reports whether client has no refusal left now.
func (c *clientLimits) spent(client string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.byClient[client]
	return ok && l.TokensAt(c.clock.Now()) < 1
}

// refused charges client one refused request.
func (c *clientLimits) refused(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	l, ok := c.byClient[client]
	if !ok {
		if len(c.byClient) >= maxLimitedClients {
			c.forgetWhole()
		}
		l = rate.NewLimiter(c.every, c.burst)
		c.byClient[client] = l
	}
	l.AllowN(now, 1)
}

// forgetWhole drops clients whose budget is whole again, or every client
// if none is (a flood from more addresses than the map holds).
func (c *clientLimits) forgetWhole() {
	t := c.clock.Now()
	for k, l := range c.byClient {
		if l.TokensAt(t) >= float64(c.burst) {
			delete(c.byClient, k)
		}
	}
	if len(c.byClient) >= maxLimitedClients {
		clear(c.byClient)
	}
}

// ClientAddress is the default client key: the connection's IP address,
// or, for a connection from one of trusted (the platform's proxies), the
// address its X-Forwarded-For header names nearest the end that is not
// itself a trusted proxy: each proxy appends the address it was reached
// from, so the addresses before the last untrusted one are whatever the
// client chose to write. A request from any other address has its
// X-Forwarded-For ignored.
func ClientAddress(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !isTrusted(peer, trusted) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return host // a hop that is no address: trust nothing further
		}
		if a = a.Unmap(); !isTrusted(a, trusted) {
			return a.String()
		}
	}
	return host
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies reads a comma-separated list of CIDRs or addresses,
// as the controller's --webhook-trusted-proxies gives it.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want an address or a CIDR such as 10.0.0.0/8", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// DefaultReceiverTTL is how long a receiver looked up is kept.
const DefaultReceiverTTL = 10 * time.Second

// maxCachedReceivers bounds the receivers kept; each is a repository with
// a published receiver, so the bound is only reached by a cluster with
// that many.
const maxCachedReceivers = 10_000

// receiverCache keeps the receivers found for a short time, so requests
// at a known receiver (a forge's deliveries, or a stranger's forgeries
// once the ID is out) cost its Secret one read per TTL. An unknown ID is
// not kept: its look-up costs no Secret read.
type receiverCache struct {
	rs    Receivers
	ttl   time.Duration
	clock clock.PassiveClock

	mu   sync.Mutex
	byID map[string]cachedReceiver
}

type cachedReceiver struct {
	rcv     Receiver
	expires time.Time
}

func newReceiverCache(rs Receivers, ttl time.Duration, clk clock.PassiveClock) *receiverCache {
	return &receiverCache{rs: rs, ttl: ttl, clock: clk, byID: map[string]cachedReceiver{}}
}

// Receiver implements Receivers.
func (c *receiverCache) Receiver(ctx context.Context, id string) (Receiver, error) {
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.byID[id]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.rcv, nil
	}
	rcv, err := c.rs.Receiver(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.byID, id)
		return rcv, err
	}
	if len(c.byID) >= maxCachedReceivers {
		maps.DeleteFunc(c.byID, func(_ string, e cachedReceiver) bool { return !now.Before(e.expires) })
		if len(c.byID) >= maxCachedReceivers {
			clear(c.byID)
		}
	}
	c.byID[id] = cachedReceiver{rcv: rcv, expires: now.Add(c.ttl)}
	return rcv, nil
}
