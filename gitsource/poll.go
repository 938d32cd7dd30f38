package gitsource

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
)

// PollResult is one observation of a repository.
type PollResult struct {
	// Refs are the watched refs now: what to keep as the previous refs
	// for the next poll.
	Refs RefSet
	// Listed is every ref the listing showed, watched or not, for a
	// caller that needs others (pull request heads) without listing again.
	Listed RefSet
	Detection
}

// Poll lists the repository, fetches only what detection needs (new run
// tags' and run refs' tag objects; the recent history of watched branches
// that moved, as commits and trees without blobs where the server allows)
// and runs Detect against prev. Nothing is fetched when no watched ref
// changed, which keeps an idle repository at one ref listing per poll. On
// a repository's first observation pass t.Baseline(refs) as prev, or nil
// to treat every run ref and tag as new.
func (c *Client) Poll(ctx context.Context, r Remote, prev RefSet, t Triggers) (PollResult, error) {
	return c.PollFrom(ctx, r, func(RefSet) (RefSet, error) { return prev, nil }, t)
}

// Previous gives the refs a poll compares with, knowing the watched refs
// listed now: a caller that records refs compactly rebuilds them from cur.
type Previous func(cur RefSet) (RefSet, error)

// PollFrom is Poll with the previous refs rebuilt from the listing, so a
// caller need not store every ref nor list twice. Its errors are the
// caller's, returned as they are.
func (c *Client) PollFrom(ctx context.Context, r Remote, prev Previous, t Triggers) (PollResult, error) {
	t = t.WithDefaults()
	for attempt := 1; ; attempt++ {
		res, ep, err := c.pollOnce(ctx, r, prev, t)
		switch {
		case err == nil:
			return res, nil
		case ep == nil: // listing or fetching failed: already an *Error
			return PollResult{}, err
		case errors.Is(err, errMissing) && attempt < 3:
			continue // a ref moved between the listing and the fetch: look again
		case errors.Is(err, errMissing):
			return PollResult{}, &Error{Op: "detect", URL: ep.display, Kind: ErrRefMoved, Detail: ep.redactor.mask(err.Error())}
		default:
			return PollResult{}, wrapError("detect", ep.display, ep.redactor, err)
		}
	}
}

// pollOnce returns the endpoint only with errors from detection.
func (c *Client) pollOnce(ctx context.Context, r Remote, previous Previous, t Triggers) (PollResult, *endpoint, error) {
	refs, err := c.ListRefs(ctx, r)
	if err != nil {
		return PollResult{}, nil, err
	}
	cur := t.Watched(refs)
	prev, err := previous(cur)
	if err != nil {
		return PollResult{}, nil, err
	}
	if sameRefs(prev, cur) && c.headsFetched(r, cur, t) {
		return PollResult{Refs: cur, Listed: refs}, nil, nil
	}
	s, err := c.open(r)
	if err != nil {
		return PollResult{}, nil, err
	}
	defer s.close()
	if err := c.fetchForDetect(ctx, s, prev, cur, t); err != nil {
		return PollResult{}, nil, err
	}
	d, err := Detect(prev, cur, t, s.store)
	if err != nil {
		return PollResult{}, s.ep, err
	}
	c.heads.Store(s.key, branchHeads(cur, t))
	return PollResult{Refs: cur, Listed: refs, Detection: d}, nil, nil
}

// headsFetched reports whether the watched branches' heads are known to be
// in the cache already, so an idle poll need not open it: the history of a
// head must be there before the branch moves, to tell a force-push from a
// fast-forward. The record is memory only; losing it costs one look.
func (c *Client) headsFetched(r Remote, cur RefSet, t Triggers) bool {
	want := branchHeads(cur, t)
	if len(want) == 0 {
		return true
	}
	ep, err := newEndpoint(r, c.opts.DialTimeout)
	if err != nil {
		return false
	}
	v, ok := c.heads.Load(repoKey(ep, r.Auth))
	if !ok {
		return false
	}
	have := v.(map[string]string)
	return maps.Equal(have, want)
}

// branchHeads maps the watched branches of refs to their heads.
func branchHeads(refs RefSet, t Triggers) map[string]string {
	heads := map[string]string{}
	for name, ref := range refs {
		if t.kindOf(name) == refBranch {
			heads[name] = ref.SHA
		}
	}
	return heads
}

func sameRefs(a, b RefSet) bool {
	return maps.Equal(a, b)
}

// fetchForDetect brings the objects Detect will read.
func (c *Client) fetchForDetect(ctx context.Context, s *session, prev, cur RefSet, t Triggers) error {
	tags, branches := detectionNeeds(prev, cur, t, s.store.has)
	for _, n := range []struct {
		refs   map[string]string
		depth  int
		filter packp.Filter
	}{
		{tags, 1, filterTagsOnly},
		{branches, t.MaxWalk + 1, filterNoBlobs},
	} {
		if len(n.refs) == 0 {
			continue
		}
		_, received, err := c.fetch(ctx, s.ep, s.store, fetchPlan{choose: wantAdvertised(n.refs), depth: n.depth, filter: n.filter})
		if err != nil {
			return err
		}
		c.cache.grew(s.rel, received)
	}
	return nil
}

// detectionNeeds lists, by ref, the objects to fetch: annotated run tags
// and run refs that are new or moved, and heads of watched branches not in
// the cache (moved, or never fetched, so that a later force-push can be
// told from a fast-forward).
func detectionNeeds(prev, cur RefSet, t Triggers, has func(string) bool) (tags, branches map[string]string) {
	tags, branches = map[string]string{}, map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		ref := cur[name]
		if has(ref.SHA) {
			continue
		}
		switch t.kindOf(name) {
		case refRunTag, refRunRef:
			if p, ok := prev[name]; tagObject(ref) != "" && (!ok || p.SHA != ref.SHA) {
				tags[name] = ref.SHA
			}
		case refBranch:
			branches[name] = ref.SHA
		}
	}
	return tags, branches
}

// wantAdvertised wants the objects of refs that the server still
// advertises where they were listed; refs that moved or went since are
// left for the next poll.
func wantAdvertised(refs map[string]string) func(*packp.AdvRefs) ([]plumbing.Hash, error) {
	return func(ar *packp.AdvRefs) ([]plumbing.Hash, error) {
		var wants []plumbing.Hash
		seen := map[plumbing.Hash]bool{}
		for _, name := range slices.Sorted(maps.Keys(refs)) {
			h, ok := ar.References[name]
			if ok && h.String() == refs[name] && !seen[h] {
				seen[h] = true
				wants = append(wants, h)
			}
		}
		return wants, nil
	}
}
