package shared

import (
	"math/rand/v2"
	"time"
)

const (
	ReasonGitUnavailable = "GitUnavailable"
)

func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		d = time.Minute
	}
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

func Short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
