package forge

import (
	"net/http"
	"strconv"
	"time"

	"k8s.io/utils/clock"
)

// Bounds of a rate-limit wait: a forge's odd header must neither spin the
// reconciler nor park a run's status for hours.
const (
	minWait     = time.Second
	maxWait     = time.Hour
	defaultWait = time.Minute // secondary limits without a Retry-After
)

// rateLimitWait says whether resp is a rate-limit answer (403 or 429 with
// rate-limit headers, or any 429) and how long to wait. It reads
// Retry-After first, then X-RateLimit-Remaining/Reset (GitHub, Gitea) or
// RateLimit-Remaining/Reset (GitLab).
func rateLimitWait(resp *http.Response, clk clock.PassiveClock) (time.Duration, bool) {
	if resp == nil || (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests) {
		return 0, false
	}
	h := resp.Header
	if s := h.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return bound(time.Duration(n) * time.Second), true
		}
		if t, err := http.ParseTime(s); err == nil {
			return bound(t.Sub(clk.Now())), true
		}
	}
	for _, prefix := range []string{"X-RateLimit-", "RateLimit-"} {
		if h.Get(prefix+"Remaining") != "0" {
			continue
		}
		if n, err := strconv.ParseInt(h.Get(prefix+"Reset"), 10, 64); err == nil {
			return bound(time.Unix(n, 0).Sub(clk.Now())), true
		}
		return defaultWait, true
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return defaultWait, true
	}
	return 0, false
}

func bound(d time.Duration) time.Duration {
	return min(max(d, minWait), maxWait)
}
