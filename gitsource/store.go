package gitsource

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	gitcache "github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// repoStore is the object store of one cached repository. It reads with
// go-git; packs are added by ingestPack. Callers hold the repository lock.
type repoStore struct {
	dir string
	st  *filesystem.Storage
}

func openRepoStore(dir string) (*repoStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "objects", "pack"), 0o755); err != nil {
		return nil, err
	}
	return &repoStore{dir: dir}, nil
}

func (s *repoStore) packDir() string { return filepath.Join(s.dir, "objects", "pack") }

// storage opens go-git's view of the packs, again after each new pack.
func (s *repoStore) storage() *filesystem.Storage {
	if s.st == nil {
		s.st = filesystem.NewStorageWithOptions(osfs.New(s.dir), gitcache.NewObjectLRU(4<<20),
			filesystem.Options{KeepDescriptors: true, LargeObjectThreshold: 1 << 20})
	}
	return s.st
}

// reload forgets the open packs, so new ones are seen.
func (s *repoStore) reload() {
	s.close()
}

func (s *repoStore) close() {
	if s.st != nil {
		_ = s.st.Close()
		s.st = nil
	}
}

func (s *repoStore) has(sha string) bool {
	return s.storage().HasEncodedObject(plumbing.NewHash(sha)) == nil
}

// packs counts the packs, to compact a repository that has gathered many.
func (s *repoStore) packs() int {
	m, _ := filepath.Glob(filepath.Join(s.packDir(), "pack-*.idx"))
	return len(m)
}

// errMissing: an object is not in the cache (yet); fetching may bring it.
// It matches ErrNotFound.
var errMissing = fmt.Errorf("%w: not fetched", ErrNotFound)

func notFound(what string, sha string) error {
	return fmt.Errorf("%w: %s %s", errMissing, what, sha)
}

func objNotFound(err error) bool { return errors.Is(err, plumbing.ErrObjectNotFound) }

// Commit implements Graph.
func (s *repoStore) Commit(sha string) (Commit, error) {
	c, err := object.GetCommit(s.storage(), plumbing.NewHash(sha))
	if objNotFound(err) {
		return Commit{}, notFound("commit", sha)
	}
	if err != nil {
		return Commit{}, fmt.Errorf("%w: commit %s: %w", ErrCorrupt, sha, err)
	}
	out := Commit{SHA: sha, Time: c.Committer.When.UTC(), Author: ident(c.Author)}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, p.String())
	}
	return out, nil
}

// Tag implements Graph.
func (s *repoStore) Tag(sha string) (Tag, error) {
	t, err := object.GetTag(s.storage(), plumbing.NewHash(sha))
	if objNotFound(err) {
		return Tag{}, notFound("tag", sha)
	}
	if err != nil {
		return Tag{}, fmt.Errorf("%w: tag %s: %w", ErrCorrupt, sha, err)
	}
	return Tag{SHA: sha, Name: t.Name, Target: t.Target.String(), TargetType: t.TargetType.String(),
		Tagger: ident(t.Tagger), Message: t.Message}, nil
}

func ident(sig object.Signature) string {
	return sig.Name + " <" + sig.Email + ">"
}

// TauFiles implements Graph. It reads only the trees on the patterns'
// directories, never the whole tree.
func (s *repoStore) TauFiles(commit string, patterns []string) (map[string]string, error) {
	root, err := s.rootTree(commit)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range patterns {
		dir, name := path.Split(p)
		tree := root
		if dir = strings.Trim(dir, "/"); dir != "" {
			tree, err = root.Tree(dir)
			if errors.Is(err, object.ErrDirectoryNotFound) {
				continue
			}
			if objNotFound(err) {
				return nil, notFound("tree of", commit)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: tree %s of %s: %w", ErrCorrupt, dir, commit, err)
			}
		}
		for _, e := range tree.Entries {
			if ok, _ := path.Match(name, e.Name); ok && e.Mode.IsFile() {
				out[path.Join(dir, e.Name)] = e.Hash.String()
			}
		}
	}
	return out, nil
}

func (s *repoStore) rootTree(commit string) (*object.Tree, error) {
	c, err := object.GetCommit(s.storage(), plumbing.NewHash(commit))
	if objNotFound(err) {
		return nil, notFound("commit", commit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: commit %s: %w", ErrCorrupt, commit, err)
	}
	t, err := object.GetTree(s.storage(), c.TreeHash)
	if objNotFound(err) {
		return nil, notFound("tree of", commit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: tree of %s: %w", ErrCorrupt, commit, err)
	}
	return t, nil
}

// readFile returns one file at commit, refusing files over maxBytes.
func (s *repoStore) readFile(commit, name string, maxBytes int64) ([]byte, error) {
	root, err := s.rootTree(commit)
	if err != nil {
		return nil, err
	}
	e, err := root.FindEntry(path.Clean(strings.TrimPrefix(name, "/")))
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, fmt.Errorf("%w: %s at %s", ErrNotFound, name, commit)
	}
	if objNotFound(err) {
		return nil, notFound("tree of", commit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %w", ErrCorrupt, name, commit, err)
	}
	if e.Mode != filemode.Regular && e.Mode != filemode.Executable {
		return nil, fmt.Errorf("%w: %s at %s is not a regular file", ErrNotFound, name, commit)
	}
	blob, err := object.GetBlob(s.storage(), e.Hash)
	if objNotFound(err) {
		return nil, notFound("blob of "+name+" at", commit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %w", ErrCorrupt, name, commit, err)
	}
	if blob.Size > maxBytes {
		return nil, &LimitError{Limit: "file size", Path: name, Max: maxBytes}
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
