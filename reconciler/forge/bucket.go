package forge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Buckets holds one token bucket per credential (API URL and token), so
// that many runs reported with one token stay well inside the forge's
// limit however many repositories share it. GitHub allows 5,000 requests
// an hour per token: the default, 1 a second with bursts of 20, stays
// under it.
type Buckets struct {
	Rate  rate.Limit // default 1 per second
	Burst int        // default 20

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// For returns the bucket of a credential. The token is only hashed.
func (b *Buckets) For(apiURL, token string) *rate.Limiter {
	sum := sha256.Sum256([]byte(apiURL + "\x00" + token))
	key := hex.EncodeToString(sum[:])
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buckets == nil {
		b.buckets = map[string]*rate.Limiter{}
	}
	l, ok := b.buckets[key]
	if !ok {
		r, burst := b.Rate, b.Burst
		if r == 0 {
			r = 1
		}
		if burst == 0 {
			burst = 20
		}
		l = rate.NewLimiter(r, burst)
		b.buckets[key] = l
	}
	return l
}

// paced takes a token before each post; when the bucket is empty it does
// not block a reconcile worker but answers with a WaitError, so the run is
// requeued for when a token is there.
type paced struct {
	StatusPoster
	forge  Type
	bucket *rate.Limiter
	clock  clock.PassiveClock
	taken  bool // Take took the next post's token
}

// Taker is a paced poster: Take takes the next post's token, or answers a
// WaitError, before the caller writes anything for the post, so a run
// waiting for the forge's budget costs no API write per try.
type Taker interface{ Take() error }

// Take implements Taker.
func (p *paced) Take() error {
	if p.taken {
		return nil
	}
	if err := p.take(); err != nil {
		return err
	}
	p.taken = true
	return nil
}

func (p *paced) Post(ctx context.Context, s Status) (Posted, error) {
	if err := p.Take(); err != nil {
		return Posted{}, err
	}
	p.taken = false
	return p.StatusPoster.Post(ctx, s)
}

// take takes a token, or says how long until one is there.
func (p *paced) take() error {
	r := p.bucket.ReserveN(p.clock.Now(), 1)
	if d := r.DelayFrom(p.clock.Now()); d > 0 {
		r.CancelAt(p.clock.Now())
		return &WaitError{Forge: p.forge, After: max(d, time.Second)}
	}
	return nil
}
