package gitsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
)

var (
	shaRe    = regexp.MustCompile(`^[0-9a-f]{40}$`)
	digestRe = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// maxPacks is how many packs a cached repository gathers before it is
// dropped and fetched afresh, which keeps object lookups cheap.
const maxPacks = 64

// repoKey names a repository's cache entry: one per URL and credentials,
// so objects fetched with one tenant's credentials never serve another's.
func repoKey(ep *endpoint, c Credentials) string {
	return hashString(ep.display, c.identity())[:32]
}

// session is a locked cached repository.
type session struct {
	ep      *endpoint
	key     string
	rel     string
	store   *repoStore
	release func()
}

func (c *Client) open(r Remote) (*session, error) {
	if c.cache == nil {
		return nil, errNoCache
	}
	ep, err := newEndpoint(r, c.opts.DialTimeout)
	if err != nil {
		return nil, err
	}
	key := repoKey(ep, r.Auth)
	rel, release := c.cache.lockRepo(key)
	store, err := openRepoStore(c.cache.path(rel))
	if err != nil {
		release()
		return nil, err
	}
	if store.packs() > maxPacks {
		store.close()
		c.cache.forget(rel)
		if store, err = openRepoStore(c.cache.path(rel)); err != nil {
			release()
			return nil, err
		}
	}
	return &session{ep: ep, key: key, rel: rel, store: store, release: release}, nil
}

func (s *session) close() {
	s.store.close()
	s.release()
}

// Archive returns the source archive of commit, which ref pointed at,
// fetching the commit shallowly (depth 1, that one ref) unless it is
// cached. Errors: ErrNotFound when the ref or commit is gone, ErrRefMoved
// when the ref moved and the server does not serve commits by id,
// ErrTooLarge past a limit; a failure never leaves a partial archive.
func (c *Client) Archive(ctx context.Context, r Remote, ref, commit string) (*Archive, error) {
	if !shaRe.MatchString(commit) {
		return nil, &Error{Op: "archive", Kind: ErrNotFound, Detail: fmt.Sprintf("%q is not a full commit SHA", commit)}
	}
	s, err := c.open(r)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if a := c.cachedArchive(s.key, commit); a != nil {
		return a, nil
	}
	a, err := c.buildFromStore(ctx, s, commit)
	if errors.Is(err, errMissing) {
		a, err = c.fetchAndBuild(ctx, s, ref, commit)
	}
	if err != nil {
		return nil, wrapError("archive", s.ep.display, s.ep.redactor, err)
	}
	return c.storeArchive(s.key, a)
}

func (c *Client) buildFromStore(ctx context.Context, s *session, commit string) (*Archive, error) {
	if !s.store.has(commit) {
		return nil, notFound("commit", commit)
	}
	return buildArchive(ctx, blobSource{store: s.store}, commit, c.cache.tmpDir(), c.opts.Limits)
}

func (c *Client) fetchAndBuild(ctx context.Context, s *session, ref, commit string) (*Archive, error) {
	sp, n, err := c.fetch(ctx, s.ep, s.store, fetchPlan{choose: wantCommit(ref, commit), depth: 1, spool: true})
	if err != nil {
		return nil, err
	}
	c.cache.grew(s.rel, n)
	defer func() { _ = sp.close() }()
	if !s.store.has(commit) {
		return nil, fmt.Errorf("%w: the server did not send commit %s", ErrNotFound, commit)
	}
	return buildArchive(ctx, blobSource{store: s.store, spool: sp}, commit, c.cache.tmpDir(), c.opts.Limits)
}

type archiveRecord struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	Files  int    `json:"files"`
}

func (c *Client) commitRecord(key, commit string) string {
	return c.cache.path(filepath.Join("commits", key, commit))
}

func archiveRel(digest string) string { return filepath.Join("archives", digest+".tar.gz") }

// cachedArchive finds an archive built before for this repository and
// commit, if it is still there.
func (c *Client) cachedArchive(key, commit string) *Archive {
	data, err := os.ReadFile(c.commitRecord(key, commit))
	if err != nil {
		return nil
	}
	var rec archiveRecord
	if json.Unmarshal(data, &rec) != nil || !digestRe.MatchString(rec.Digest) {
		return nil
	}
	rel := archiveRel(rec.Digest)
	info, err := os.Stat(c.cache.path(rel))
	if err != nil || info.Size() != rec.Size {
		return nil
	}
	c.cache.touch(rel)
	return &Archive{Commit: commit, Digest: rec.Digest, Size: rec.Size, Files: rec.Files, Path: c.cache.path(rel)}
}

// storeArchive moves a built archive into place and records it.
func (c *Client) storeArchive(key string, a *Archive) (*Archive, error) {
	rel := archiveRel(a.Digest)
	final := c.cache.path(rel)
	if _, err := os.Stat(final); err == nil {
		_ = os.Remove(a.Path) // an equal tree was archived before
	} else if err := os.Rename(a.Path, final); err != nil {
		_ = os.Remove(a.Path)
		return nil, err
	} else {
		c.cache.grew(rel, a.Size)
	}
	a.Path = final
	rec, _ := json.Marshal(archiveRecord{Digest: a.Digest, Size: a.Size, Files: a.Files})
	recPath := c.commitRecord(key, a.Commit)
	if err := os.MkdirAll(filepath.Dir(recPath), 0o755); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(recPath, rec, c.cache.tmpDir()); err != nil {
		return nil, err
	}
	return a, nil
}

// OpenArchive opens a built archive by digest, for serving it to a run's
// init container.
func (c *Client) OpenArchive(digest string) (*os.File, error) {
	if c.cache == nil {
		return nil, errNoCache
	}
	if !digestRe.MatchString(digest) {
		return nil, fmt.Errorf("%w: %q is not a SHA-256 digest", ErrNotFound, digest)
	}
	rel := archiveRel(digest)
	f, err := os.Open(c.cache.path(rel))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: archive %s", ErrNotFound, digest)
	}
	if err == nil {
		c.cache.touch(rel)
	}
	return f, err
}

// ReadFile returns the file at path in commit (which ref pointed at),
// fetching the commit shallowly unless it is cached. Errors match
// ErrNotFound when the file (or ref, or commit) does not exist and
// ErrTooLarge for a file over Limits.MaxFileBytes.
func (c *Client) ReadFile(ctx context.Context, r Remote, ref, commit, path string) ([]byte, error) {
	if !shaRe.MatchString(commit) {
		return nil, &Error{Op: "read", Kind: ErrNotFound, Detail: fmt.Sprintf("%q is not a full commit SHA", commit)}
	}
	s, err := c.open(r)
	if err != nil {
		return nil, err
	}
	defer s.close()
	data, err := s.store.readFile(commit, path, c.opts.Limits.MaxFileBytes)
	if errors.Is(err, errMissing) {
		_, n, ferr := c.fetch(ctx, s.ep, s.store, fetchPlan{choose: wantCommit(ref, commit), depth: 1})
		if ferr != nil {
			return nil, ferr
		}
		c.cache.grew(s.rel, n)
		data, err = s.store.readFile(commit, path, c.opts.Limits.MaxFileBytes)
	}
	return data, wrapError("read", s.ep.display, s.ep.redactor, err)
}

func writeFileAtomic(path string, data []byte, tmpDir string) error {
	f, err := os.CreateTemp(tmpDir, "record_")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// filters for detection fetches: tags need only the tag and commit objects,
// branch walks only commits and trees.
var (
	filterTagsOnly = packp.FilterTreeDepth(0)
	filterNoBlobs  = packp.FilterBlobNone()
)
