package gitsource

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBackoffDoublesUpToItsMaximum(t *testing.T) {
	b := DefaultBackoff
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, b.delay(n))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
}

func TestRetryWaitsOnTheClockAndOnlyForTransientErrors(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := Backoff{Initial: time.Second, Max: time.Minute, Attempts: 3}
	tests := map[string]struct {
		errs     []error
		attempts int
		want     error
	}{
		"success at once":                    {errs: []error{nil}, attempts: 1},
		"two transient failures, then works": {errs: []error{ErrServer, ErrUnreachable, nil}, attempts: 3},
		"a terminal failure is not retried":  {errs: []error{ErrAuth}, attempts: 1, want: ErrAuth},
		"attempts run out":                   {errs: []error{ErrTimeout, ErrTimeout, ErrTimeout, nil}, attempts: 3, want: ErrTimeout},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := 0
			done := make(chan error)
			go func() {
				done <- retry(context.Background(), clk, b, time.Minute, func(context.Context) error {
					n++
					return tc.errs[n-1]
				})
			}()
			for {
				select {
				case err := <-done:
					if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
					if n != tc.attempts {
						t.Errorf("%d attempts, want %d", n, tc.attempts)
					}
					return
				default:
					if clk.HasWaiters() {
						clk.Step(time.Minute)
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
}
