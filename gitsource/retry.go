package gitsource

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Backoff bounds the retries of one operation: transient failures
// (ErrUnreachable, ErrTimeout, ErrServer) are retried after Initial,
// 2*Initial, ... up to Max between attempts, Attempts times in all. Other
// failures are returned at once.
type Backoff struct {
	Initial  time.Duration
	Max      time.Duration
	Attempts int
}

// DefaultBackoff is Argo CD's ls-remote policy: 250 ms doubling to 5 s.
var DefaultBackoff = Backoff{Initial: 250 * time.Millisecond, Max: 5 * time.Second, Attempts: 4}

// delay is the wait before retry number n (n >= 1).
func (b Backoff) delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// retry runs attempt until it succeeds, fails terminally, runs out of
// attempts or ctx ends. Each attempt gets its own timeout.
func retry(ctx context.Context, clk clock.Clock, b Backoff, timeout time.Duration, attempt func(context.Context) error) error {
	attempts := max(b.Attempts, 1)
	var err error
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		err = attempt(actx)
		cancel()
		if err == nil || !Transient(err) || n >= attempts || ctx.Err() != nil {
			return err
		}
		t := clk.NewTimer(b.delay(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C():
		}
	}
}
