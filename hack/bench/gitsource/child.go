package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/taugrid/taugrid/gitsource"
)

// child runs one measured go-git workload and prints its samples as JSON.
func child(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("child: no workload")
	}
	var out []sample
	var err error
	switch args[0] {
	case "poll":
		out, err = childPoll(args[1:])
	case "list":
		out, err = childList(args[1:])
	case "archive":
		out, err = childArchive(args[1:])
	case "naive":
		out, err = childNaive(args[1:])
	default:
		err = fmt.Errorf("child: unknown workload %q", args[0])
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// measure runs f and samples this process's CPU, wall time and
// allocations around it.
func measure(f func() error) (sample, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu, start := selfUsage(), time.Now()
	err := f()
	s := sample{Wall: time.Since(start), CPU: selfUsage() - cpu}
	runtime.ReadMemStats(&after)
	s.Allocs, s.Bytes = after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc
	return s, err
}

// childPoll polls every repository: a cold pass on a new client, a warm
// pass, then a pass with a bounded number of concurrent polls, the way
// the reconciler's workers would.
func childPoll(args []string) ([]sample, error) {
	urls, err := readLines(args[0])
	if err != nil {
		return nil, err
	}
	conc, _ := strconv.Atoi(args[1])
	dir, err := os.MkdirTemp("", "poll-cache-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	c, err := gitsource.NewClient(gitsource.Options{CacheDir: dir})
	if err != nil {
		return nil, err
	}
	tr := gitsource.Triggers{}
	if len(args) > 2 && args[2] == "true" {
		tr.Branches = []string{"main"}
	}
	prev := make([]gitsource.RefSet, len(urls))
	pollOne := func(i int) error {
		res, err := c.Poll(context.Background(), gitsource.Remote{URL: urls[i]}, prev[i], tr)
		if err != nil {
			return err
		}
		if prev[i] != nil && len(res.Events) > 0 {
			return fmt.Errorf("%s: %d events from an unchanged repository", urls[i], len(res.Events))
		}
		prev[i] = res.Refs
		return nil
	}
	// Observe once, so that every measured poll compares against refs.
	for i := range urls {
		refs, err := c.ListRefs(context.Background(), gitsource.Remote{URL: urls[i]})
		if err != nil {
			return nil, err
		}
		prev[i] = tr.Watched(refs)
	}
	c, _ = gitsource.NewClient(gitsource.Options{CacheDir: dir}) // cold: no connections
	var out []sample
	for range 2 {
		s, err := measure(func() error {
			for i := range urls {
				if err := pollOne(i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	s, err := measure(func() error { return parallel(len(urls), conc, pollOne) })
	return append(out, s), err
}

func parallel(n, workers int, f func(int) error) error {
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, n)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// childList lists one repository's refs twice: cold and warm.
func childList(args []string) ([]sample, error) {
	c, err := gitsource.NewClient(gitsource.Options{})
	if err != nil {
		return nil, err
	}
	var out []sample
	for range 2 {
		var n int
		s, err := measure(func() error {
			refs, err := c.ListRefs(context.Background(), gitsource.Remote{URL: args[0]})
			n = len(refs)
			return err
		})
		if err != nil {
			return nil, err
		}
		if want, _ := strconv.Atoi(args[1]); n != want {
			return nil, fmt.Errorf("listed %d refs, want %d", n, want)
		}
		out = append(out, s)
	}
	return out, nil
}

// childArchive builds the archive of one commit in a fresh cache.
func childArchive(args []string) ([]sample, error) {
	url, ref, commit, dir := args[0], args[1], args[2], args[3]
	c, err := gitsource.NewClient(gitsource.Options{CacheDir: dir})
	if err != nil {
		return nil, err
	}
	var a *gitsource.Archive
	s, err := measure(func() error {
		a, err = c.Archive(context.Background(), gitsource.Remote{URL: url}, ref, commit)
		return err
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "archive %s: %d entries, %d bytes\n", a.Digest, a.Files, a.Size)
	return []sample{s}, nil
}

// childNaive is go-git used the obvious way: a shallow single-branch clone
// with a worktree checkout.
func childNaive(args []string) ([]sample, error) {
	s, err := measure(func() error {
		_, err := git.PlainClone(args[1], false, &git.CloneOptions{URL: args[0], Depth: 1, SingleBranch: true})
		return err
	})
	return []sample{s}, err
}
