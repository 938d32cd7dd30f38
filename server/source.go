package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/taugrid/taugrid/policy"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	Git    Archives
	// BaseURL is how pods reach this server, e.g.
	// http://tau-controller.taugrid-system.svc:9090.
	BaseURL string
	// FetchImage runs the init container that downloads and verifies.
	FetchImage string
	// Reviewer checks the init containers' tokens; APIReader reads their
	// pods and runs around the cache, so a pod just created is found.
	Reviewer  TokenReviewer
	APIReader client.Reader
}

// SourceArchive builds (or finds cached) the archive of the run's commit.
func (s *Sources) SourceArchive(ctx context.Context, repo *taugridv1.TauRepository, run *taugridv1.TauRun) (*render.SourceArchive, error) {
	a, err := s.archive(ctx, repo, run)
	if err != nil {
		return nil, err
	}
	return s.location(run, a.Digest), nil
}

// SourceLocation is where the run's pods fetch its source archive, from
// the digest its status records; nil before one was built.
func (s *Sources) SourceLocation(run *taugridv1.TauRun) *render.SourceArchive {
	if run.Status.SourceDigest == "" {
		return nil
	}
	return s.location(run, run.Status.SourceDigest)
}

// location is the archive of digest as the run's pods fetch it, and
// where they report their progress (served beside it, ProgressPathPrefix).
func (s *Sources) location(run *taugridv1.TauRun, digest string) *render.SourceArchive {
	base := strings.TrimRight(s.BaseURL, "/")
	return &render.SourceArchive{
		URL:      fmt.Sprintf("%s%s%s/%s/%s.tar.gz", base, SourcePathPrefix, run.Namespace, run.Name, digest),
		SHA256:   digest,
		Image:    s.FetchImage,
		Progress: fmt.Sprintf("%s%s%s/%s", base, ProgressPathPrefix, run.Namespace, run.Name),
	}
}

func (s *Sources) archive(ctx context.Context, repo *taugridv1.TauRepository, run *taugridv1.TauRun) (*gitsource.Archive, error) {
	remote, err := policy.RemoteFor(ctx, s.Client, repo.Namespace, repo.Spec.GitSource)
	if err != nil {
		return nil, err
	}
	return s.Git.Archive(ctx, remote, run.Spec.Trigger.Ref, run.Spec.Commit)
}

var sourcePath = regexp.MustCompile(`^/source/([a-z0-9-]{1,63})/([a-z0-9-]{1,63})/([0-9a-f]{64})\.tar\.gz$`)

// The pod-bound claims of a ServiceAccount token, as a TokenReview reports
// them in the user's extra fields.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// ServeHTTP serves an archive only to the init container of the attempt it
// was built for, while that attempt can still start: the request carries
// the pod's ServiceAccount token for the source audience, the API server
// vouches for it and names the pod, and the pod's labels name the path's
// run and its current attempt. Without a token it is 401; with any other
// it is 403, without saying which part did not match.
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
	token := bearer(r)
	if token == "" {
		http.Error(w, "a source archive needs the run's init container token", http.StatusUnauthorized)
		return
	}
	run, err := s.authorize(r.Context(), token, m[1], m[2], m[3])
	switch {
	case errors.Is(err, errSourceDenied):
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	case err != nil:
		http.Error(w, "cannot check the token now; try again", http.StatusServiceUnavailable)
		return
	}
	s.serve(w, r, run, m[3])
}

func (s *Sources) serve(w http.ResponseWriter, r *http.Request, run *taugridv1.TauRun, digest string) {
	f, err := s.open(r.Context(), run, digest)
	if err != nil {
		http.Error(w, "source archive unavailable", http.StatusServiceUnavailable)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("ETag", `"`+digest+`"`)
	if r.Method == http.MethodHead {
		return
	}
	// Up to gigabytes: each write gets its own deadline, so a slow but
	// reading client finishes and one that stopped reading is dropped.
	_, _ = io.Copy(streamResponse(w), f)
}

// errSourceDenied: the token is not the current attempt's init container
// of this run, or the run can no longer start it.
var errSourceDenied = errors.New("not this run's init container")

// authorize returns the run when token is the pod-bound source token of a
// pod of the run's current attempt and the run can still start it.
// errSourceDenied for anything else; other errors are transient.
func (s *Sources) authorize(ctx context.Context, token, ns, name, digest string) (*taugridv1.TauRun, error) {
	podName, podUID, err := reviewPod(ctx, s.Reviewer, token, ns, render.SourceTokenAudience)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := s.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: podName}, pod); err != nil {
		return nil, deniedIfNotFound(err)
	}
	run := &taugridv1.TauRun{}
	if err := s.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, run); err != nil {
		return nil, deniedIfNotFound(err)
	}
	if string(pod.UID) != podUID || !mayFetch(run, pod.Labels, digest) {
		return nil, errSourceDenied
	}
	return run, nil
}

func deniedIfNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return errSourceDenied
	}
	return err
}

// reviewPod asks the API server who token is: it must be a ServiceAccount
// of namespace ns, for audience, bound to a pod.
func reviewPod(ctx context.Context, reviewer TokenReviewer, token, ns, audience string) (podName, podUID string, err error) {
	st, err := reviewer.Review(ctx, token, []string{audience})
	if err != nil {
		return "", "", err
	}
	if !st.Authenticated || !slices.Contains(st.Audiences, audience) {
		return "", "", errSourceDenied
	}
	sa, ok := strings.CutPrefix(st.User.Username, "system:serviceaccount:")
	saNS, _, _ := strings.Cut(sa, ":")
	names, uids := st.User.Extra[extraPodName], st.User.Extra[extraPodUID]
	if !ok || saNS != ns || len(names) != 1 || len(uids) != 1 {
		return "", "", errSourceDenied
	}
	return names[0], uids[0], nil
}

// mayFetch says whether a pod with these labels may fetch the archive of
// digest now: it belongs to the run's current attempt, that attempt has
// not ended and the run is not final.
func mayFetch(run *taugridv1.TauRun, labels map[string]string, digest string) bool {
	n := len(run.Status.Attempts)
	if run.Status.Phase.Final() || run.Status.SourceDigest != digest || n == 0 || labels[render.LabelRun] != run.Name {
		return false
	}
	current := run.Status.Attempts[n-1]
	return current.EndTime == nil && labels[render.LabelAttempt] == strconv.Itoa(current.Number)
}

// Archives builds and opens source archives; gitsource.Client is one.
type Archives interface {
	Archive(ctx context.Context, r gitsource.Remote, ref, commit string) (*gitsource.Archive, error)
	OpenArchive(digest string) (*os.File, error)
}

// TokenReviewer asks the API server who a bearer token is.
type TokenReviewer interface {
	Review(ctx context.Context, token string, audiences []string) (*authenticationv1.TokenReviewStatus, error)
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// KubeTokenReviewer reviews tokens with the API server's TokenReview.
type KubeTokenReviewer struct {
	Client client.Client
}

// Review creates a TokenReview for token and audiences.
func (k KubeTokenReviewer) Review(ctx context.Context, token string, audiences []string) (*authenticationv1.TokenReviewStatus, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}
	if err := k.Client.Create(ctx, tr); err != nil {
		return nil, fmt.Errorf("reviewing a pod's token: %w", err)
	}
	return &tr.Status, nil
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
