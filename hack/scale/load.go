package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// request is one run asked for: a run ref as `tau run` pushes it (an
// annotated tag object holding the run request, under refs/tau/runs/), or
// a run tag (every fourth one annotated).
type request struct {
	repo, n int
	id      string
	tag     bool
}

func (q request) ref() string {
	if q.tag {
		return "refs/tags/run/" + q.id
	}
	return taugridv1.RunRefPrefix + q.id
}

// offer asks for the configured runs at the configured rate: every 200 ms
// the requests due are written to their repositories (one batch of ref
// updates per repository, as concurrent pushes land), and each repository
// written to is nudged as a forge's push webhook would.
func (h *harness) offer(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	issued := 0
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for issued < h.cfg.runs {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		due := min(h.cfg.runs, int(time.Since(start).Seconds()*h.cfg.rate)) - issued
		batch := map[int][]request{}
		for range due {
			q := request{repo: rng.IntN(h.cfg.repos), n: issued, id: fmt.Sprintf("s-%06d", issued), tag: issued%2 == 1}
			batch[q.repo] = append(batch[q.repo], q)
			issued++
		}
		if err := h.forEach(len(batch), keys(batch), func(repo int) error {
			return h.write(ctx, repo, batch[repo])
		}); err != nil {
			return err
		}
		h.offered.Store(int64(issued))
	}
	h.offerEnd = time.Now()
	return nil
}

func keys(m map[int][]request) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// forEach calls f for each item, 8 at once.
func (h *harness) forEach(n int, items []int, f func(int) error) error {
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for _, it := range items {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- f(it)
		}()
	}
	var first error
	for range items {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// write creates the requests' refs in the bare repository with two git
// processes (tag objects, then one ref transaction), records when each was
// requested, and nudges the repository.
func (h *harness) write(ctx context.Context, repo int, qs []request) error {
	bare := filepath.Join(h.gitRoot, h.repoPath(repo)+".git")
	dir, err := os.MkdirTemp(h.dir, "tags-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var paths []string
	var annotated []int
	for i, q := range qs {
		if q.tag && q.n%8 != 7 {
			continue // a lightweight run tag points at the commit
		}
		name, msg := "tau-run-"+q.id, "target: default\n"
		if q.tag {
			name, msg = "run/"+q.id, "sweep point "+q.id+"\n"
		}
		obj := fmt.Sprintf("object %s\ntype commit\ntag %s\ntagger Tau Scale <scale@example.com> %d +0000\n\n%s", h.commit, name, time.Now().Unix(), msg)
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, []byte(obj), 0o644); err != nil {
			return err
		}
		paths = append(paths, p)
		annotated = append(annotated, i)
	}
	oids := make([]string, len(qs))
	if len(paths) > 0 {
		out, err := gittest.Git(h.gitEnv, bare, []byte(strings.Join(paths, "\n")+"\n"), "hash-object", "-t", "tag", "-w", "--stdin-paths")
		if err != nil {
			return err
		}
		for j, oid := range strings.Fields(out) {
			oids[annotated[j]] = oid
		}
	}
	var tx strings.Builder
	for i, q := range qs {
		oid := oids[i]
		if oid == "" {
			oid = h.commit
		}
		fmt.Fprintf(&tx, "create %s %s\n", q.ref(), oid)
	}
	if _, err := gittest.Git(h.gitEnv, bare, []byte(tx.String()), "update-ref", "--stdin"); err != nil {
		return err
	}
	now := time.Now()
	ns, name, _ := strings.Cut(h.repoPath(repo), "/")
	for _, q := range qs {
		h.rec.request(ns+"/"+name+" "+q.ref(), now)
	}
	return h.nudge(ctx, ns, name, now)
}

// nudge sets the annotation the controller's webhook receiver sets on a
// signed push delivery: the repository polls now.
func (h *harness) nudge(ctx context.Context, ns, name string, now time.Time) error {
	repo := &taugridv1.TauRepository{}
	repo.Namespace, repo.Name = ns, name
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, taugridv1.AnnotationNudge, now.UTC().Format(time.RFC3339Nano))
	return h.k8s.Patch(ctx, repo, client.RawPatch("application/merge-patch+json", []byte(patch)))
}
