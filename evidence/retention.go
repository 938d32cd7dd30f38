package evidence

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Retention says which sealed bundles to keep; the zero value keeps all.
type Retention struct {
	// MaxAge prunes bundles sealed longer ago; 0 keeps any age.
	MaxAge time.Duration
	// KeepLast keeps only the newest N bundles; 0 keeps any number.
	KeepLast int
}

// ParseRetention reads "30d", "720h", "last=500" or both, comma-separated
// ("30d,last=500"); "" keeps everything.
func ParseRetention(s string) (Retention, error) {
	var r Retention
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
		case strings.HasPrefix(part, "last="):
			n, err := strconv.Atoi(strings.TrimPrefix(part, "last="))
			if err != nil || n < 1 {
				return r, fmt.Errorf("evidence retention %q: last= wants a positive count", s)
			}
			r.KeepLast = n
		case strings.HasSuffix(part, "d"):
			n, err := strconv.Atoi(strings.TrimSuffix(part, "d"))
			if err != nil || n < 1 {
				return r, fmt.Errorf("evidence retention %q: want days like 30d", s)
			}
			r.MaxAge = time.Duration(n) * 24 * time.Hour
		default:
			d, err := time.ParseDuration(part)
			if err != nil || d <= 0 {
				return r, fmt.Errorf("evidence retention %q: want 30d, 720h or last=N", s)
			}
			r.MaxAge = d
		}
	}
	return r, nil
}

// blobGrace protects blobs written moments ago, whose manifest may not be
// sealed yet, from the sweep.
const blobGrace = time.Hour

// Prune deletes the bundles retention does not keep, then every blob no
// remaining bundle names. It returns how many bundles and blobs it deleted.
func Prune(ctx context.Context, s Store, r Retention, now time.Time) (bundles, blobs int, err error) {
	if r == (Retention{}) {
		return 0, 0, nil
	}
	entries, err := s.Manifests(ctx, "", "")
	if err != nil {
		return 0, 0, err
	}
	slices.SortFunc(entries, func(a, b Entry) int { return b.Modified.Compare(a.Modified) }) // newest first
	for i, e := range entries {
		if (r.KeepLast > 0 && i >= r.KeepLast) || (r.MaxAge > 0 && now.Sub(e.Modified) > r.MaxAge) {
			if err := s.Delete(ctx, e.Path); err != nil {
				return bundles, 0, err
			}
			if k, ok := parseKeyPath(e.Path); ok {
				if err := s.Delete(ctx, k.AttestationPath()); err != nil {
					return bundles, 0, err
				}
			}
			bundles++
		}
	}
	if bundles == 0 {
		return 0, 0, nil
	}
	blobs, err = sweep(ctx, s, now)
	return bundles, blobs, err
}

// sweep deletes blobs that no manifest names.
func sweep(ctx context.Context, s Store, now time.Time) (int, error) {
	entries, err := s.Manifests(ctx, "", "")
	if err != nil {
		return 0, err
	}
	live := map[string]bool{}
	for _, e := range entries {
		k, _ := parseKeyPath(e.Path)
		m, _, err := Load(ctx, s, k)
		if err != nil {
			return 0, fmt.Errorf("reading %s before sweeping: %w", e.Path, err)
		}
		for _, a := range m.Artifacts {
			live[a.SHA256] = true
		}
	}
	all, err := s.Blobs(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range all {
		if live[strings.TrimPrefix(b.Path, "blobs/sha256/")] || now.Sub(b.Modified) < blobGrace {
			continue
		}
		if err := s.Delete(ctx, b.Path); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
