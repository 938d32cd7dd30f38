package gitsource

import (
	"path"
	"testing"
)

// match answers as path.Match does, prefix patterns and others alike.
func TestMatchAgreesWithPathMatch(t *testing.T) {
	patterns := []string{"run/*", "run/*/x", "*", "run-*", "run/a?", "run/[ab]*", `run\*`, "exact", "run/**", "r*n/*"}
	names := []string{"run/", "run/a", "run/a/b", "run/ab", "runx", "run-1", "exact", "exact/1", "r/n", "rabn/1", "run/*", "", "run\\x"}
	for _, p := range patterns {
		for _, n := range names {
			want, _ := path.Match(p, n)
			if got := match(p, n); got != want {
				t.Errorf("match(%q, %q) = %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}
