package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SourcePathPrefix is where the controller serves source archives:
// /source/<namespace>/<run>/<sha256>.tar.gz.
const SourcePathPrefix = "/source/"

// Sources builds runs' source archives through gitsource and serves them
// to the runs' init containers, so pods never hold git credentials.
type Sources struct {
	Client client.Reader
	Git    Git
	// BaseURL is how pods reach this server, e.g.
	// http://tau-controller.tau-system.svc:9090.
	BaseURL string
	// FetchImage runs the init container that downloads and verifies.
	FetchImage string
}

// SourceArchive builds (or finds cached) the archive of the run's commit.
func (s *Sources) SourceArchive(ctx context.Context, repo *taugridv1.TauRepository, run *taugridv1.TauRun) (*render.SourceArchive, error) {
	a, err := s.archive(ctx, repo, run)
	if err != nil {
		return nil, err
	}
	return s.location(run, a.Digest), nil
}

// location is the archive of digest as the run's pods fetch it.
func (s *Sources) location(run *taugridv1.TauRun, digest string) *render.SourceArchive {
	return &render.SourceArchive{
		URL:    fmt.Sprintf("%s%s%s/%s/%s.tar.gz", strings.TrimRight(s.BaseURL, "/"), SourcePathPrefix, run.Namespace, run.Name, digest),
		SHA256: digest,
		Image:  s.FetchImage,
	}
}

func (s *Sources) archive(ctx context.Context, repo *taugridv1.TauRepository, run *taugridv1.TauRun) (*gitsource.Archive, error) {
	remote, err := remoteFor(ctx, s.Client, repo.Namespace, repo.Spec.GitSource)
	if err != nil {
		return nil, err
	}
	return s.Git.Archive(ctx, remote, run.Spec.Trigger.Ref, run.Spec.Commit)
}

var sourcePath = regexp.MustCompile(`^/source/([a-z0-9-]{1,63})/([a-z0-9-]{1,63})/([0-9a-f]{64})\.tar\.gz$`)

// ServeHTTP serves an archive only to the run it was built for: the path
// names the run and the digest its status records. Anything else is 404,
// without saying which part did not match.
func (s *Sources) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	m := sourcePath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.NotFound(w, r)
		return
	}
	ns, name, digest := m[1], m[2], m[3]
	run := &taugridv1.TauRun{}
	if err := s.Client.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, run); err != nil || run.Status.SourceDigest != digest {
		http.NotFound(w, r)
		return
	}
	f, err := s.open(r.Context(), run, digest)
	if err != nil {
		http.Error(w, "source archive unavailable", http.StatusServiceUnavailable)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("ETag", `"`+digest+`"`)
	if r.Method == http.MethodHead {
		return
	}
	// Up to gigabytes: each write gets its own deadline, so a slow but
	// reading client finishes and one that stopped reading is dropped.
	_, _ = io.Copy(streamResponse(w), f)
}

// open returns the cached archive, rebuilding it from git if the cache
// evicted it; a rebuilt archive must have the same digest.
func (s *Sources) open(ctx context.Context, run *taugridv1.TauRun, digest string) (io.ReadCloser, error) {
	if f, err := s.Git.OpenArchive(digest); err == nil {
		return f, nil
	}
	repo := &taugridv1.TauRepository{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo); err != nil {
		return nil, err
	}
	a, err := s.archive(ctx, repo, run)
	if err != nil {
		return nil, err
	}
	if a.Digest != digest {
		return nil, errors.New("rebuilt archive differs from the recorded digest")
	}
	return s.Git.OpenArchive(digest)
}
