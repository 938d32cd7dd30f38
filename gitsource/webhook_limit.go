package gitsource

import (
	"net"
	"net/http"
	"sync"

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

// RemoteClient is the default client key: the connection's IP address.
// Behind a proxy every request shares the proxy's address; set
// WebhookOptions.ClientKey to read the proxy's forwarded-for header then.
func RemoteClient(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// refusal reports answers that spend a client's budget.
func refusal(status int) bool {
	return status == http.StatusNotFound || status == http.StatusUnauthorized || status == http.StatusBadRequest
}
