package gitsource

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Archive is a commit's tree as a deterministic tar.gz: entries sorted by
// path, fixed times, owners and modes, no .git, symlinks stored as links.
// The same commit always gives the same bytes, hence the same Digest, for
// a given build of this package.
type Archive struct {
	Commit string
	// Digest is the hex SHA-256 of the .tar.gz: its name in the cache and
	// what the run's init container verifies.
	Digest string
	Size   int64
	// Files counts the entries: files, symlinks and directories.
	Files int
	// Path is the archive in the cache. It stays until evicted; open it
	// with Client.OpenArchive to be safe from eviction races.
	Path string
}

// archiveTime is every entry's modification time: the earliest a zip can
// hold, as reproducible-build tools use, rather than a commit's time, so
// two commits with equal trees share one archive.
var archiveTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// blobSource gives blob contents: the spool of a fresh fetch, else the
// object store.
type blobSource struct {
	store *repoStore
	spool *spool
}

func (b blobSource) open(h plumbing.Hash) (io.ReadCloser, int64, error) {
	if b.spool != nil {
		r, size, ok, err := b.spool.open(h)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			return io.NopCloser(r), size, nil
		}
	}
	blob, err := object.GetBlob(b.store.storage(), h)
	if objNotFound(err) {
		return nil, 0, notFound("blob", h.String())
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: blob %s: %w", ErrCorrupt, h, err)
	}
	r, err := blob.Reader()
	return r, blob.Size, err
}

// treeEntry is one path of the archive.
type treeEntry struct {
	path string // directories end in "/"
	mode filemode.FileMode
	hash plumbing.Hash
}

// listTree collects the entries under commit's tree, refusing names no
// git checkout would write and skipping .git and submodules.
func listTree(store *repoStore, commit string, lim Limits) ([]treeEntry, error) {
	root, err := store.rootTree(commit)
	if err != nil {
		return nil, err
	}
	var out []treeEntry
	var walk func(t *object.Tree, prefix string) error
	walk = func(t *object.Tree, prefix string) error {
		for _, e := range t.Entries {
			if err := checkEntryName(e.Name); err != nil {
				return err
			}
			if strings.EqualFold(e.Name, ".git") || e.Mode == filemode.Submodule {
				continue
			}
			p := prefix + e.Name
			if len(out) >= lim.MaxFiles {
				return &LimitError{Limit: "file count", Max: int64(lim.MaxFiles)}
			}
			if e.Mode != filemode.Dir {
				out = append(out, treeEntry{path: p, mode: e.Mode, hash: e.Hash})
				continue
			}
			out = append(out, treeEntry{path: p + "/", mode: e.Mode, hash: e.Hash})
			sub, err := object.GetTree(store.storage(), e.Hash)
			if objNotFound(err) {
				return notFound("tree", e.Hash.String())
			}
			if err != nil {
				return fmt.Errorf("%w: tree %s: %w", ErrCorrupt, p, err)
			}
			if err := walk(sub, p+"/"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return nil, err
	}
	// Byte order with directories ending in "/" puts each directory right
	// before its contents.
	slices.SortFunc(out, func(a, b treeEntry) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

func checkEntryName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: tree entry %q is not a valid file name", ErrCorrupt, name)
	}
	return nil
}

// archiveWriter streams a tar.gz to a temporary file and hashes it.
type archiveWriter struct {
	f    *os.File
	buf  *bufio.Writer
	sum  *hashCounter
	gz   *gzip.Writer
	tar  *tar.Writer
	lim  Limits
	data int64 // file bytes written, for the archive size limit
}

type hashCounter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (h *hashCounter) Write(p []byte) (int, error) {
	_, _ = h.h.Write(p) // hashes never fail
	h.n += int64(len(p))
	return len(p), nil
}

func newArchiveWriter(tmpDir string, lim Limits) (*archiveWriter, error) {
	f, err := os.CreateTemp(tmpDir, "archive_")
	if err != nil {
		return nil, err
	}
	a := &archiveWriter{f: f, buf: bufio.NewWriterSize(f, 256<<10), sum: &hashCounter{h: sha256.New()}, lim: lim}
	a.gz, _ = gzip.NewWriterLevel(io.MultiWriter(a.buf, a.sum), gzip.DefaultCompression)
	a.tar = tar.NewWriter(a.gz)
	return a, nil
}

// abort removes the partial archive.
func (a *archiveWriter) abort() {
	a.f.Close()
	_ = os.Remove(a.f.Name())
}

// finish completes the archive and returns its digest and size.
func (a *archiveWriter) finish() (string, int64, error) {
	for _, step := range []func() error{a.tar.Close, a.gz.Close, a.buf.Flush, a.f.Sync, a.f.Close} {
		if err := step(); err != nil {
			return "", 0, err
		}
	}
	return hex.EncodeToString(a.sum.h.Sum(nil)), a.sum.n, nil
}

func (a *archiveWriter) header(e treeEntry, size int64, link string) error {
	h := &tar.Header{
		Name:     e.path,
		ModTime:  archiveTime,
		Mode:     0o644,
		Typeflag: tar.TypeReg,
		Size:     size,
		Format:   tar.FormatPAX,
	}
	switch e.mode {
	case filemode.Dir:
		h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
	case filemode.Executable:
		h.Mode = 0o755
	case filemode.Symlink:
		h.Typeflag, h.Mode, h.Size, h.Linkname = tar.TypeSymlink, 0o777, 0, link
	}
	return a.tar.WriteHeader(h)
}

func (a *archiveWriter) entry(src blobSource, e treeEntry) error {
	if e.mode == filemode.Dir {
		return a.header(e, 0, "")
	}
	r, size, err := src.open(e.hash)
	if err != nil {
		return err
	}
	defer r.Close()
	if size > a.lim.MaxFileBytes {
		return &LimitError{Limit: "file size", Path: e.path, Max: a.lim.MaxFileBytes}
	}
	if a.data += size; a.data > a.lim.MaxArchiveBytes {
		return &LimitError{Limit: "archive size", Path: e.path, Max: a.lim.MaxArchiveBytes}
	}
	if e.mode == filemode.Symlink {
		// The target is stored, never followed: nothing here touches the
		// file system outside the archive.
		link, err := io.ReadAll(io.LimitReader(r, 4097))
		if err != nil {
			return err
		}
		if len(link) > 4096 || len(link) == 0 {
			return fmt.Errorf("%w: symlink %s has an invalid target", ErrCorrupt, e.path)
		}
		return a.header(e, 0, string(link))
	}
	if err := a.header(e, size, ""); err != nil {
		return err
	}
	n, err := io.Copy(a.tar, r)
	if err == nil && n != size {
		err = fmt.Errorf("%w: blob of %s is shorter than its size", ErrCorrupt, e.path)
	}
	return err
}

// buildArchive writes commit's tree from src as an archive in tmpDir and
// returns it with its temporary path; the caller moves it into place.
func buildArchive(ctx context.Context, src blobSource, commit, tmpDir string, lim Limits) (*Archive, error) {
	entries, err := listTree(src.store, commit, lim)
	if err != nil {
		return nil, err
	}
	a, err := newArchiveWriter(tmpDir, lim)
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		if i%256 == 0 && ctx.Err() != nil {
			a.abort()
			return nil, ctx.Err()
		}
		if err := a.entry(src, e); err != nil {
			a.abort()
			return nil, err
		}
	}
	digest, size, err := a.finish()
	if err != nil {
		a.abort()
		return nil, err
	}
	return &Archive{Commit: commit, Digest: digest, Size: size, Files: len(entries), Path: a.f.Name()}, nil
}
