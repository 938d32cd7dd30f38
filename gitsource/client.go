package gitsource

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// Options configure a Client. Zero values take the defaults shown.
type Options struct {
	// Clock times backoffs and metrics. Default: the real clock.
	Clock clock.Clock
	// Registerer receives the client's metrics. Nil: not exported.
	Registerer prometheus.Registerer
	// ListTimeout bounds one ref listing attempt. Default 30 s.
	ListTimeout time.Duration
	// FetchTimeout bounds one fetch attempt. Default 5 min.
	FetchTimeout time.Duration
	// DialTimeout bounds connecting to a server. Default 10 s.
	DialTimeout time.Duration
	// Backoff retries transient failures. Default DefaultBackoff.
	Backoff Backoff
	// CacheDir holds fetched objects and built archives. Required to fetch.
	CacheDir string
	// CacheMaxBytes bounds CacheDir; the least recently used repositories
	// and archives are removed past it. Default 10 GiB.
	CacheMaxBytes int64
	// Limits bound what one repository may cost.
	Limits Limits
	// HTTPClient makes HTTPS requests. Default: a client with keep-alive
	// connections shared by all repositories.
	HTTPClient *http.Client
}

// Limits bound the cost of one repository. Exceeding one is an error that
// matches ErrTooLarge and names the limit.
type Limits struct {
	// MaxRepositoryBytes bounds the pack received by one fetch. Default 2 GiB.
	MaxRepositoryBytes int64
	// MaxArchiveBytes bounds the total size of the files in one archive.
	// Default 4 GiB.
	MaxArchiveBytes int64
	// MaxFiles bounds the number of entries in one archive. Default 200,000.
	MaxFiles int
	// MaxFileBytes bounds one file. Default 512 MiB.
	MaxFileBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxRepositoryBytes <= 0 {
		l.MaxRepositoryBytes = 2 << 30
	}
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = 4 << 30
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 200_000
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 512 << 20
	}
	return l
}

// Client lists, fetches and archives remote repositories. It is safe for
// concurrent use; one Client serves every repository of a controller.
type Client struct {
	opts    Options
	clock   clock.Clock
	metrics *metrics
	http    transport.Transport
	ssh     transport.Transport
	lists   singleflight.Group
	cache   *cache
	// heads records, per cached repository, the watched branch heads last
	// seen fetched (map[string]string, never modified once stored).
	heads sync.Map
}

// NewClient builds a Client and registers its metrics.
func NewClient(opts Options) (*Client, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ListTimeout <= 0 {
		opts.ListTimeout = 30 * time.Second
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = 5 * time.Minute
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.Backoff.Attempts == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.CacheMaxBytes <= 0 {
		opts.CacheMaxBytes = 10 << 30
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: defaultHTTPTransport(opts.DialTimeout)}
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	c := &Client{
		opts:    opts,
		clock:   opts.Clock,
		metrics: m,
		http:    githttp.NewClientWithOptions(opts.HTTPClient, &githttp.ClientOptions{CacheMaxEntries: 64}),
		ssh:     gitssh.DefaultClient,
	}
	if opts.CacheDir != "" {
		c.cache, err = openCache(opts.CacheDir, opts.CacheMaxBytes, opts.Clock)
		if err != nil {
			return nil, err
		}
		c.cache.onRemove = func(key string) { c.heads.Delete(key) }
	}
	return c, nil
}

// defaultHTTPTransport keeps connections to each forge open between polls:
// thousands of repositories on one host then cost no TLS handshake each.
func defaultHTTPTransport(dial time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   dial,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

func (c *Client) transport(ep *endpoint) transport.Transport {
	if ep.ep.Protocol == "ssh" {
		return c.ssh
	}
	return c.http
}

var errNoCache = errors.New("the client has no CacheDir")

func hashString(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
