package forge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Buckets holds one token bucket per credential (API URL and token), so
// that many runs reported with one token stay well inside the forge's
// limit however many repositories share it. GitHub allows 5,000 requests
// an hour per token: the default, 1 a second with bursts of 20, stays
// under it.
//
// When a bucket is empty, each post that must wait is given the next free
// token and told when it is there, so the posts waiting on one credential
// go in turn, one try each. hack/scale, 10,000 runs on one token: every
// waiting run was told "in a second", and thousands of them tried again
// each second for the one token there was (4,700 reconciles a second, 22%
// of what the controller allocated).
type Buckets struct {
	Rate  rate.Limit // default 1 per second
	Burst int        // default 20

	mu      sync.Mutex
	buckets map[string]*bucket
}

// DefaultRate and DefaultBurst pace each credential when Buckets leaves
// Rate and Burst zero.
const (
	DefaultRate  rate.Limit = 1
	DefaultBurst int        = 20
)

// slotTTL is how long a token given to a post that never came for it
// (its run deleted) stays set aside before it is forgotten.
const slotTTL = 10 * time.Minute

// bucket is one credential's pace, and the tokens already given to posts
// waiting for their turn.
type bucket struct {
	mu      sync.Mutex
	limiter *rate.Limiter
	slots   map[string]time.Time // a waiting post's key → when its token is there
	swept   time.Time
}

func (b *Buckets) bucketFor(apiURL, token string) *bucket {
	sum := sha256.Sum256([]byte(apiURL + "\x00" + token))
	key := hex.EncodeToString(sum[:])
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buckets == nil {
		b.buckets = map[string]*bucket{}
	}
	l, ok := b.buckets[key]
	if !ok {
		r, burst := b.Rate, b.Burst
		if r == 0 {
			r = DefaultRate
		}
		if burst == 0 {
			burst = DefaultBurst
		}
		l = &bucket{limiter: rate.NewLimiter(r, burst), slots: map[string]time.Time{}}
		b.buckets[key] = l
	}
	return l
}

// take gives the post key a token: 0 when it may post now, or how long
// until the token set aside for it is there. A post asking again before
// its turn is told the time left, and takes no other token.
func (b *bucket) take(key string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at, ok := b.slots[key]; ok {
		if !now.Before(at) {
			delete(b.slots, key)
			return 0
		}
		return at.Sub(now)
	}
	d := b.limiter.ReserveN(now, 1).DelayFrom(now)
	if d <= 0 {
		return 0
	}
	b.slots[key] = now.Add(d)
	if now.Sub(b.swept) >= slotTTL {
		for k, at := range b.slots {
			if now.Sub(at) >= slotTTL {
				delete(b.slots, k)
			}
		}
		b.swept = now
	}
	return d
}

// Waiting is how many posts wait for their turn, over all credentials
// (the gauge taugrid_forge_posts_waiting).
func (b *Buckets) Waiting() int {
	b.mu.Lock()
	all := make([]*bucket, 0, len(b.buckets))
	for _, l := range b.buckets {
		all = append(all, l)
	}
	b.mu.Unlock()
	n := 0
	for _, l := range all {
		l.mu.Lock()
		n += len(l.slots)
		l.mu.Unlock()
	}
	return n
}

// WaitingGauge is the gauge of Waiting, to register with the metrics.
func (b *Buckets) WaitingGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "taugrid_forge_posts_waiting",
		Help: "Commit status posts waiting for their forge credential's pace (--forge-rate), over all credentials.",
	}, func() float64 { return float64(b.Waiting()) })
}

// paced takes a token before each post; when the bucket is empty it does
// not block a reconcile worker but answers with a WaitError for the time
// its turn comes, so the run is requeued for then.
type paced struct {
	StatusPoster
	forge  Type
	bucket *bucket
	clock  clock.PassiveClock
	taken  bool // Take took the next post's token
}

// Taker is a paced poster: Take takes the token of the post of s, or
// answers a WaitError for when it is there, before the caller writes
// anything for the post, so a run waiting for the forge's budget costs no
// API write per try.
type Taker interface{ Take(s Status) error }

// Take implements Taker.
func (p *paced) Take(s Status) error {
	if p.taken {
		return nil
	}
	if err := p.wait(s); err != nil {
		return err
	}
	p.taken = true
	return nil
}

// wait takes the token of the post of s from the credential's bucket, or
// answers a WaitError for when the token set aside for it is there.
func (p *paced) wait(s Status) error {
	if d := p.bucket.take(slotKey(s), p.clock.Now()); d > 0 {
		return &WaitError{Forge: p.forge, After: d}
	}
	return nil
}

func (p *paced) Post(ctx context.Context, s Status) (Posted, error) {
	if err := p.Take(s); err != nil {
		return Posted{}, err
	}
	p.taken = false
	return p.StatusPoster.Post(ctx, s)
}

// slotKey names the post of s: its commit and context, which the run
// names.
func slotKey(s Status) string {
	return s.Owner + "/" + s.Repo + "\x00" + s.SHA + "\x00" + s.Context
}
