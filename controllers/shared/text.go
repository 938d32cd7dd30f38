package shared

import (
	"math/rand/v2"
	"strings"
	"time"
)

// Jitter is d (a minute when d is not positive) plus up to 10%, so that
// many objects polled at the same interval do not poll in step.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		d = time.Minute
	}
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

// Short is a commit's SHA as people read it: its first 12 characters.
func Short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// FirstLine is s up to its first newline, for an event's one line.
func FirstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
