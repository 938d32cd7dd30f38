package gitsource

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestCacheEvictsLeastRecentlyUsedPastItsBudget(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	c, err := openCache(dir, 100, clk)
	if err != nil {
		t.Fatal(err)
	}
	add := func(key string, size int) string {
		rel, release := c.lockRepo(key)
		if err := os.MkdirAll(c.path(rel), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.path(rel), "data"), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		c.grew(rel, int64(size))
		release()
		clk.Step(time.Minute)
		return rel
	}
	old := add("old", 40)
	used := add("used", 40)
	c.touch(old) // used again: now the newest
	clk.Step(time.Minute)

	// A pinned repository is never evicted, even when it is the oldest.
	pinned, release := c.lockRepo("used")
	add("new", 40) // 120 > 100: the least recently used unpinned goes
	if _, err := os.Stat(c.path(used)); err != nil {
		t.Errorf("a repository in use was evicted")
	}
	if _, err := os.Stat(c.path(old)); !os.IsNotExist(err) {
		t.Errorf("%s survived, want it evicted: the oldest not in use", old)
	}
	release()
	_ = pinned

	if c.total > 100 {
		t.Errorf("total %d over the budget", c.total)
	}
	t.Run("a new process finds what the last one left", func(t *testing.T) {
		again, err := openCache(dir, 1000, clk)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.total, again.total); diff != "" {
			t.Errorf("total (-before +after):\n%s", diff)
		}
	})
}
