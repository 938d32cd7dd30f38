package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// fetchPlan is one upload-pack request: no haves are ever sent, so the
// server returns every object the wants need down to depth, and the cache
// never has to track shallow boundaries.
type fetchPlan struct {
	// choose picks the wants from the server's advertisement; none means
	// there is nothing to fetch.
	choose func(ar *packp.AdvRefs) ([]plumbing.Hash, error)
	depth  int
	// filter is used when the server supports partial clone.
	filter packp.Filter
	spool  bool
}

// fetch runs plan with retries, adding one pack to store. With plan.spool
// the blobs received are also returned uncompressed.
func (c *Client) fetch(ctx context.Context, ep *endpoint, store *repoStore, plan fetchPlan) (*spool, int64, error) {
	start := c.clock.Now()
	var sp *spool
	var received int64
	err := retry(ctx, c.clock, c.opts.Backoff, c.opts.FetchTimeout, func(ctx context.Context) error {
		if sp != nil {
			_ = sp.close()
			sp = nil
		}
		var err error
		if plan.spool {
			if sp, err = newSpool(c.cache.tmpDir(), c.opts.Limits.MaxFileBytes, c.opts.Limits.MaxArchiveBytes); err != nil {
				return err
			}
		}
		received, err = c.fetchOnce(ctx, ep, store, plan, sp)
		return wrapError("fetch", ep.display, ep.redactor, err)
	})
	c.metrics.observe("fetch", start, c.clock.Now(), err)
	if err != nil && sp != nil {
		_ = sp.close()
		sp = nil
	}
	return sp, received, err
}

func (c *Client) fetchOnce(ctx context.Context, ep *endpoint, store *repoStore, plan fetchPlan, sp *spool) (int64, error) {
	sess, err := c.transport(ep).NewUploadPackSession(ep.ep, ep.auth)
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		ar, err = packp.NewAdvRefs(), nil
	}
	if err != nil {
		return 0, err
	}
	wants, err := plan.choose(ar)
	if err != nil || len(wants) == 0 {
		return 0, err
	}
	req, err := newUploadRequest(ar, wants, plan)
	if err != nil {
		return 0, err
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return 0, serverError(err)
	}
	defer func() { _ = resp.Close() }()
	counter := &countingReader{r: packStream(req, resp)}
	_, err = ingestPack(counter, store.packDir(), ingestLimits{
		packBytes:   c.opts.Limits.MaxRepositoryBytes,
		objectBytes: c.opts.Limits.MaxArchiveBytes,
		deltaBytes:  c.opts.Limits.MaxFileBytes,
		objects:     maxPackObjects(c.opts.Limits),
	}, sp)
	c.metrics.bytes.Add(float64(counter.n))
	store.reload()
	return counter.n, serverError(err)
}

// maxPackObjects bounds the objects of one pack, and so the memory its
// index takes (about 150 bytes each): a depth-1 pack holds about one object
// per file, a branch walk's adds its changes.
func maxPackObjects(l Limits) uint32 {
	return uint32(min(2*int64(l.MaxFiles)+100_000, 1<<31))
}

func newUploadRequest(ar *packp.AdvRefs, wants []plumbing.Hash, plan fetchPlan) (*packp.UploadPackRequest, error) {
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	req.Capabilities.Delete(capability.ThinPack) // no bases to complete one with
	if ar.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return nil, err
		}
	}
	req.Wants = wants
	if plan.depth > 0 {
		if !ar.Capabilities.Supports(capability.Shallow) {
			return nil, fmt.Errorf("%w: the server cannot make shallow packs", ErrUnsupported)
		}
		req.Depth = packp.DepthCommits(plan.depth)
		if err := req.Capabilities.Set(capability.Shallow); err != nil {
			return nil, err
		}
	}
	if plan.filter != "" && ar.Capabilities.Supports(capability.Filter) {
		req.Filter = plan.filter
		if err := req.Capabilities.Set(capability.Filter); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// packStream removes the side-band framing, if any was negotiated.
func packStream(req *packp.UploadPackRequest, resp io.Reader) io.Reader {
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		return sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		return sideband.NewDemuxer(sideband.Sideband, resp)
	}
	return resp
}

// serverError classifies the messages git servers send on the error
// channel: a want that is no longer advertised (its ref was deleted or
// moved between the advertisement and the request) is not found.
func serverError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "not our ref") || strings.Contains(msg, "no such remote ref") ||
		strings.Contains(msg, "want ") && strings.Contains(msg, "not valid") {
		return fmt.Errorf("%w: the server no longer has the object asked for (ref deleted or moved during the fetch): %w", ErrNotFound, err)
	}
	return err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// wantCommit chooses what to fetch to get commit as ref's target: the
// ref's advertised object when it still resolves to commit, else the
// commit itself if the server serves objects by id.
func wantCommit(ref, commit string) func(*packp.AdvRefs) ([]plumbing.Hash, error) {
	return func(ar *packp.AdvRefs) ([]plumbing.Hash, error) {
		h, ok := ar.References[ref]
		if ok {
			resolved := h
			if p, peeled := ar.Peeled[ref]; peeled {
				resolved = p
			}
			if resolved.String() == commit {
				return []plumbing.Hash{h}, nil
			}
		}
		if ar.Capabilities.Supports(capability.AllowReachableSHA1InWant) ||
			ar.Capabilities.Supports("allow-any-sha1-in-want") {
			return []plumbing.Hash{plumbing.NewHash(commit)}, nil
		}
		if !ok {
			return nil, fmt.Errorf("%w: ref %s no longer exists", ErrNotFound, ref)
		}
		return nil, fmt.Errorf("%w: %s now points at another commit than %s", ErrRefMoved, ref, commit)
	}
}
