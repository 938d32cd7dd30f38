package gitsource

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Ref is where one remote ref points.
type Ref struct {
	// SHA is the object the ref names: a commit, or an annotated tag.
	SHA string `json:"sha"`
	// Peeled is the commit an annotated tag points at; empty otherwise.
	Peeled string `json:"peeled,omitempty"`
}

// Commit is the commit the ref resolves to.
func (r Ref) Commit() string {
	if r.Peeled != "" {
		return r.Peeled
	}
	return r.SHA
}

// RefSet maps full ref names ("refs/tags/run/x") to where they point.
type RefSet map[string]Ref

// ListRefs lists the remote's refs without cloning, like `git ls-remote`.
// Callers asking for the same repository with the same credentials while a
// listing is in flight share its result. An empty repository has no refs.
func (c *Client) ListRefs(ctx context.Context, r Remote) (RefSet, error) {
	ep, err := newEndpoint(r, c.opts.DialTimeout)
	if err != nil {
		return nil, err
	}
	key := ep.display + "\x00" + r.Auth.identity()
	// The shared listing outlives any one caller's cancellation; its own
	// timeouts bound it.
	shared := context.WithoutCancel(ctx)
	ch := c.lists.DoChan(key, func() (any, error) { return c.listWithRetry(shared, ep) })
	select {
	case <-ctx.Done():
		return nil, &Error{Op: "list", URL: ep.display, Kind: classify(ctx.Err()), Detail: ctx.Err().Error()}
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		refs := res.Val.(RefSet)
		if res.Shared {
			c.metrics.shared.Inc()
			refs = maps.Clone(refs) // each caller may modify its own
		}
		return refs, nil
	}
}

func (c *Client) listWithRetry(ctx context.Context, ep *endpoint) (RefSet, error) {
	start := c.clock.Now()
	var refs RefSet
	err := retry(ctx, c.clock, c.opts.Backoff, c.opts.ListTimeout, func(ctx context.Context) error {
		var err error
		refs, err = c.list(ctx, ep)
		return wrapError("list", ep.display, ep.redactor, err)
	})
	c.metrics.observe("list", start, c.clock.Now(), err)
	return refs, err
}

// list reads the ref advertisement of one upload-pack session.
func (c *Client) list(ctx context.Context, ep *endpoint) (RefSet, error) {
	sess, err := c.transport(ep).NewUploadPackSession(ep.ep, ep.auth)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return RefSet{}, nil
	}
	if err != nil {
		return nil, err
	}
	refs := make(RefSet, len(ar.References))
	for name, h := range ar.References {
		if !strings.HasPrefix(name, "refs/") {
			continue
		}
		refs[name] = Ref{SHA: h.String()}
	}
	for name, h := range ar.Peeled {
		if r, ok := refs[name]; ok {
			r.Peeled = h.String()
			refs[name] = r
		}
	}
	return refs, nil
}
