package main

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// fixtureClock reads start at the moment it is made and moves on with real
// time from there, so a live view that waits on it still ticks, while every
// time it shows is measured from the fixture's own dates, not today's.
type fixtureClock struct {
	clock.RealClock
	offset time.Duration
}

func (c fixtureClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c fixtureClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// setClock makes the CLI's clock read start now, until the test ends.
func setClock(t *testing.T, start time.Time) fixtureClock {
	t.Helper()
	c := fixtureClock{offset: time.Until(start)}
	clk = c
	t.Cleanup(func() { clk = clock.RealClock{} })
	return c
}
