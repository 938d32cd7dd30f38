package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProgressPathPrefix is where a run's pods report how far their attempt
// is: POST /progress/<namespace>/<run>, served beside the source archives.
const ProgressPathPrefix = "/progress/"

var progressPath = regexp.MustCompile(`^/progress/([a-z0-9-]{1,63})/([a-z0-9-]{1,63})$`)

// Progress records how far a run's attempt is, as the attempt's own pods
// report it ($TAU_PROGRESS_URL, with the pod's progress token), in the
// run's status.progress, where the start estimate of the runs waiting
// behind it reads it. A report costs the API server nothing but its
// writes: the token's review is kept for its pod (tokenKept), the pod
// and the run are read from the cache, and a run's progress is written
// at most once per Every unless it moved by 10 points or more or reached
// 100.
type Progress struct {
	// Client reads pods and runs from the cache and patches runs' status.
	Client   client.Client
	Reviewer TokenReviewer
	Clock    clock.PassiveClock
	// Every is the least time between two writes of a run's progress
	// that moved by less than 10 points; 0: a minute.
	Every time.Duration

	once     sync.Once
	reviewed *lru.Cache // sha256 of a token: reviewedToken
	written  *lru.Cache // run UID: the RunProgress this replica last wrote
}

// tokenKept is how long a token's review stands: a token's pod is
// checked at every report, so a token kept after its pod is gone
// reports nothing.
const tokenKept = 10 * time.Minute

type reviewedToken struct {
	pod, uid string
	ns       string
	at       time.Time
}

func (p *Progress) init() {
	p.once.Do(func() {
		p.reviewed = lru.New(4096)
		p.written = lru.New(16384)
	})
}

func (p *Progress) every() time.Duration {
	if p.Every > 0 {
		return p.Every
	}
	return time.Minute
}

// ServeHTTP takes one report: 200 when written, 202 when noted but not
// written yet (paced), 400 for a body that is no progress, 401 without a
// token, 403 for a token that is not a pod of the run's current attempt,
// 409 once the attempt has ended.
func (p *Progress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.init()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "progress is reported with POST", http.StatusMethodNotAllowed)
		return
	}
	m := progressPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.NotFound(w, r)
		return
	}
	token := bearer(r)
	if token == "" {
		http.Error(w, "progress needs the pod's token: Authorization: Bearer $(cat $TAU_PROGRESS_TOKEN_FILE)", http.StatusUnauthorized)
		return
	}
	run, attempt, err := p.authorize(r.Context(), token, m[1], m[2])
	switch {
	case errors.Is(err, errSourceDenied):
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	case errors.Is(err, errAttemptEnded):
		http.Error(w, fmt.Sprintf("attempt %d of run %s has ended: its progress is no longer recorded", attempt, run.Name), http.StatusConflict)
		return
	case err != nil:
		http.Error(w, "cannot check the token now; try again", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 256))
	if err != nil {
		http.Error(w, "progress: the body is one number, under 256 bytes", http.StatusRequestEntityTooLarge)
		return
	}
	percent, err := ParseProgress(string(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := p.Clock.Now()
	if !p.due(run, attempt, percent, now) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, "noted: %d%%; the run records its progress at most once every %s unless it moves by 10 points\n", percent, p.every())
		return
	}
	rp := taugridv1.RunProgress{Attempt: attempt, Percent: percent, Time: metav1.NewTime(now.UTC().Truncate(time.Second))}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"progress": rp}})
	// A merge patch of this field alone: nothing else of the status is
	// touched, so it races no other writer of the run.
	if err := p.Client.Status().Patch(r.Context(), run, client.RawPatch(types.MergePatchType, patch)); err != nil {
		http.Error(w, "cannot record the progress now; try again", http.StatusServiceUnavailable)
		return
	}
	p.written.Add(run.UID, rp)
	_, _ = fmt.Fprintf(w, "recorded: %d%%\n", percent)
}

// errAttemptEnded: the report's pod is the run's, but its attempt (or
// the run) has ended.
var errAttemptEnded = errors.New("the attempt has ended")

// authorize returns the run and the attempt whose pod token is: a
// pod-bound token for the progress audience of a pod of the run's current
// attempt. errSourceDenied for any other token; errAttemptEnded for one
// whose attempt ended; other errors are transient.
func (p *Progress) authorize(ctx context.Context, token, ns, name string) (*taugridv1.TauRun, int, error) {
	pod, err := p.reviewedPod(ctx, token, ns)
	if err != nil {
		return nil, 0, err
	}
	if pod.Labels[render.LabelRun] != name {
		return nil, 0, errSourceDenied
	}
	run := &taugridv1.TauRun{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, run); err != nil {
		return nil, 0, deniedIfNotFound(err)
	}
	n, err := strconv.Atoi(pod.Labels[render.LabelAttempt])
	if err != nil || n < 1 || n > len(run.Status.Attempts) {
		return nil, 0, errSourceDenied
	}
	current := run.Status.Attempts[len(run.Status.Attempts)-1]
	if n != current.Number || current.EndTime != nil || run.Status.Phase.Final() {
		return run, n, errAttemptEnded
	}
	return run, n, nil
}

// reviewedPod is the pod token is bound to, from the cache, once the API
// server vouched for the token (a review kept for tokenKept).
func (p *Progress) reviewedPod(ctx context.Context, token, ns string) (*corev1.Pod, error) {
	key := sha256.Sum256([]byte(token))
	now := p.Clock.Now()
	var rt reviewedToken
	if v, ok := p.reviewed.Get(key); ok && now.Sub(v.(reviewedToken).at) < tokenKept {
		rt = v.(reviewedToken)
	} else {
		name, uid, err := reviewPod(ctx, p.Reviewer, token, ns, render.ProgressTokenAudience)
		if err != nil {
			return nil, err
		}
		rt = reviewedToken{pod: name, uid: uid, ns: ns, at: now}
		p.reviewed.Add(key, rt)
	}
	if rt.ns != ns {
		return nil, errSourceDenied
	}
	pod := &corev1.Pod{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: rt.pod}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errSourceDenied
		}
		return nil, err
	}
	if string(pod.UID) != rt.uid || !pod.DeletionTimestamp.IsZero() {
		return nil, errSourceDenied
	}
	return pod, nil
}

// due says whether percent is to be written now: the attempt's first, a
// move of 10 points or more, 100, or any once Every passed since the last
// write.
func (p *Progress) due(run *taugridv1.TauRun, attempt int, percent int32, now time.Time) bool {
	last := run.Status.Progress
	if v, ok := p.written.Get(run.UID); ok { // newer than a lagging cache
		if w := v.(taugridv1.RunProgress); last == nil || w.Time.After(last.Time.Time) || w.Time.Equal(&last.Time) {
			last = &w
		}
	}
	if last == nil || last.Attempt != attempt {
		return true
	}
	moved := max(percent-last.Percent, last.Percent-percent)
	// Even the same percent is written once Every passed: that the run is
	// still there later makes its estimate longer.
	return moved >= 10 || percent == 100 && last.Percent != 100 || now.Sub(last.Time.Time) >= p.every()
}

// ParseProgress reads a progress report: a fraction from 0 to 1 ("0.42")
// or a percentage ("42%"), as a whole percent.
func ParseProgress(body string) (int32, error) {
	s := strings.TrimSpace(body)
	pct, isPct := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
	if isPct {
		v /= 100
	}
	if err != nil || math.IsNaN(v) || v < 0 || v > 1 {
		if len(s) > 32 {
			s = s[:32] + "..."
		}
		return 0, fmt.Errorf("progress: expected a fraction from 0 to 1 (0.42) or a percentage from 0 to 100 (42%%); got %q", s)
	}
	return int32(math.Round(v * 100)), nil
}
