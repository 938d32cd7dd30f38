package gitsource

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// cache is the bounded on-disk cache under Options.CacheDir:
//
//	repos/<key>/objects/pack/   packs fetched from one repository (one key
//	                            per URL and credentials)
//	archives/<sha256>.tar.gz    built archives, content-addressed
//	commits/<key>/<commit>      which archive a commit of a repository built
//	tmp/                        work files, emptied on start
//
// Repositories and archives are evicted least recently used first once the
// total passes the budget. Nothing in it is needed for correctness: a lost
// cache only costs fetches.
type cache struct {
	dir   string
	max   int64
	clock clock.Clock

	// onRemove is told the key of each repository removed.
	onRemove func(key string)

	mu      sync.Mutex
	entries map[string]*cacheEntry // by path relative to dir
	total   int64
	locks   map[string]*repoLock
}

type cacheEntry struct {
	size int64
	used time.Time
	pins int
}

type repoLock struct {
	mu   sync.Mutex
	refs int
}

func openCache(dir string, max int64, clk clock.Clock) (*cache, error) {
	c := &cache{dir: dir, max: max, clock: clk, entries: map[string]*cacheEntry{}, locks: map[string]*repoLock{}}
	if err := os.RemoveAll(filepath.Join(dir, "tmp")); err != nil {
		return nil, err
	}
	for _, sub := range []string{"repos", "archives", "commits", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	if err := c.scan(); err != nil {
		return nil, err
	}
	return c, nil
}

// scan accounts for what an earlier process left.
func (c *cache) scan() error {
	repos, err := os.ReadDir(filepath.Join(c.dir, "repos"))
	if err != nil {
		return err
	}
	for _, r := range repos {
		rel := filepath.Join("repos", r.Name())
		size, mod := dirSize(filepath.Join(c.dir, rel))
		c.entries[rel] = &cacheEntry{size: size, used: mod}
		c.total += size
	}
	archives, err := os.ReadDir(filepath.Join(c.dir, "archives"))
	if err != nil {
		return err
	}
	for _, a := range archives {
		if info, err := a.Info(); err == nil {
			rel := filepath.Join("archives", a.Name())
			c.entries[rel] = &cacheEntry{size: info.Size(), used: info.ModTime()}
			c.total += info.Size()
		}
	}
	return nil
}

func dirSize(dir string) (int64, time.Time) {
	var size int64
	var mod time.Time
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
				if info.ModTime().After(mod) {
					mod = info.ModTime()
				}
			}
		}
		return nil
	})
	return size, mod
}

// path is the absolute path of rel.
func (c *cache) path(rel string) string { return filepath.Join(c.dir, rel) }

// tmpDir is where work files go.
func (c *cache) tmpDir() string { return filepath.Join(c.dir, "tmp") }

// lockRepo serializes work on one repository's objects and pins it
// against eviction until release.
func (c *cache) lockRepo(key string) (rel string, release func()) {
	rel = filepath.Join("repos", key)
	c.mu.Lock()
	l := c.locks[key]
	if l == nil {
		l = &repoLock{}
		c.locks[key] = l
	}
	l.refs++
	e := c.entry(rel)
	e.pins++
	c.mu.Unlock()
	l.mu.Lock()
	return rel, func() {
		l.mu.Unlock()
		c.mu.Lock()
		e.pins--
		e.used = c.clock.Now()
		if l.refs--; l.refs == 0 {
			delete(c.locks, key)
		}
		c.mu.Unlock()
		c.evict()
	}
}

func (c *cache) entry(rel string) *cacheEntry {
	e := c.entries[rel]
	if e == nil {
		e = &cacheEntry{used: c.clock.Now()}
		c.entries[rel] = e
	}
	return e
}

// grew records that rel (a repository or an archive) changed size by delta.
func (c *cache) grew(rel string, delta int64) {
	c.mu.Lock()
	e := c.entry(rel)
	e.size += delta
	e.used = c.clock.Now()
	c.total += delta
	c.mu.Unlock()
	c.evict()
}

// touch marks rel as just used.
func (c *cache) touch(rel string) {
	c.mu.Lock()
	c.entry(rel).used = c.clock.Now()
	c.mu.Unlock()
}

// forget removes rel from disk and from the accounting.
func (c *cache) forget(rel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(rel)
}

func (c *cache) removeLocked(rel string) {
	e := c.entries[rel]
	if e == nil {
		return
	}
	_ = os.RemoveAll(c.path(rel))
	c.total -= e.size
	if e.pins > 0 {
		e.size = 0 // still in use: keep the pin count, start over
		return
	}
	delete(c.entries, rel)
	if key, ok := strings.CutPrefix(rel, "repos"+string(filepath.Separator)); ok {
		_ = os.RemoveAll(filepath.Join(c.dir, "commits", key))
		if c.onRemove != nil {
			c.onRemove(key)
		}
	}
}

// evict removes unpinned entries, least recently used first, until the
// cache fits its budget.
func (c *cache) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= c.max {
		return
	}
	rels := make([]string, 0, len(c.entries))
	for rel, e := range c.entries {
		if e.pins == 0 {
			rels = append(rels, rel)
		}
	}
	sort.Slice(rels, func(i, j int) bool {
		a, b := c.entries[rels[i]], c.entries[rels[j]]
		if !a.used.Equal(b.used) {
			return a.used.Before(b.used)
		}
		return rels[i] < rels[j]
	})
	for _, rel := range rels {
		if c.total <= c.max {
			return
		}
		c.removeLocked(rel)
	}
}
