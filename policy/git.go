package policy

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"testing/fstest"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Git is what the reconcilers need from gitsource.
type Git interface {
	ListRefs(ctx context.Context, r gitsource.Remote) (gitsource.RefSet, error)
	Poll(ctx context.Context, r gitsource.Remote, prev gitsource.RefSet, t gitsource.Triggers) (gitsource.PollResult, error)
	PollFrom(ctx context.Context, r gitsource.Remote, prev gitsource.Previous, t gitsource.Triggers) (gitsource.PollResult, error)
	ReadFile(ctx context.Context, r gitsource.Remote, ref, commit, path string) ([]byte, error)
	Archive(ctx context.Context, r gitsource.Remote, ref, commit string) (*gitsource.Archive, error)
	OpenArchive(digest string) (*os.File, error)
}

// GitFiles reads tau files of research repositories through gitsource. A
// file at a commit never changes, so it keeps the last files read: runs of
// one commit (a sweep, a burst of run refs) read git once.
type GitFiles struct {
	Client client.Reader
	Git    Git

	mu    sync.Mutex
	files map[string][]byte // by namespace, URL, commit and path
}

// maxCachedFiles bounds GitFiles' memory: tau files are at most 1 MiB and
// usually a few hundred bytes.
const maxCachedFiles = 256

// ReadFile reads path at commit, which ref pointed at.
func (g *GitFiles) ReadFile(ctx context.Context, repo *taugridv1.TauRepository, ref, commit, path string) ([]byte, error) {
	// The namespace is part of the key: a tenant reads with its own
	// credentials, never from another tenant's cache entry.
	key := repo.Namespace + "\x00" + repo.Spec.URL + "\x00" + commit + "\x00" + path
	g.mu.Lock()
	data, ok := g.files[key]
	g.mu.Unlock()
	if ok {
		return data, nil
	}
	remote, err := RemoteFor(ctx, g.Client, repo.Namespace, repo.Spec.GitSource)
	if err != nil {
		return nil, err
	}
	if data, err = g.Git.ReadFile(ctx, remote, ref, commit, path); err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.files == nil || len(g.files) >= maxCachedFiles {
		g.files = map[string][]byte{}
	}
	g.files[key] = data
	g.mu.Unlock()
	return data, nil
}

// maxPolicyArchive bounds what a platform repo may unpack into memory.
const maxPolicyArchive = 32 << 20

// treeFS unpacks a commit's source archive into an in-memory file system.
func treeFS(ctx context.Context, g Git, remote gitsource.Remote, ref, commit string) (fstest.MapFS, error) {
	a, err := g.Archive(ctx, remote, ref, commit)
	if err != nil {
		return nil, err
	}
	f, err := g.OpenArchive(a.Digest)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Unpack(f, commit, maxPolicyArchive, maxPolicyArchive, func(string) bool { return true })
}

// Unpack reads into memory the regular files of a commit's gzipped tar
// archive that keep accepts, reading at most limit bytes of the tar; a
// kept file over maxFile bytes is errTreeTooLarge. Directories are implied
// and symlinks are never followed.
func Unpack(archive io.Reader, commit string, limit, maxFile int64, keep func(name string) bool) (fstest.MapFS, error) {
	zr, err := gzip.NewReader(archive)
	if err != nil {
		return nil, err
	}
	fsys := fstest.MapFS{}
	tr := tar.NewReader(io.LimitReader(zr, limit))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fsys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the archive of %s: %w", commit, err)
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "/")
		if h.Typeflag != tar.TypeReg || !keep(name) {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxFile+1))
		if err != nil {
			return nil, err
		}
		if int64(len(data)) > maxFile {
			return nil, fmt.Errorf("%w: %s is over %d KiB", ErrTreeTooLarge, name, maxFile>>10)
		}
		fsys[name] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
}
