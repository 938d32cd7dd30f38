package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// tokens is a TokenReview stand-in: each token names the pod it is bound
// to, for one audience; it counts the reviews.
type tokens struct {
	pods    map[string][3]string // token: namespace, pod, pod UID
	aud     string
	reviews map[string]int
	down    bool
}

func (k *tokens) Review(_ context.Context, token string, audiences []string) (*authenticationv1.TokenReviewStatus, error) {
	k.reviews[token]++
	if k.down {
		return nil, errors.New("the API server is not answering")
	}
	p, ok := k.pods[token]
	if !ok || len(audiences) != 1 || audiences[0] != k.aud {
		return &authenticationv1.TokenReviewStatus{}, nil
	}
	return &authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: audiences, User: authenticationv1.UserInfo{
		Username: "system:serviceaccount:" + p[0] + ":default",
		Extra:    map[string]authenticationv1.ExtraValue{extraPodName: {p[1]}, extraPodUID: {p[2]}}}}, nil
}

func progressPod(ns, name, uid, run string, attempt string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
		Labels: map[string]string{render.LabelManagedBy: render.ManagedBy, render.LabelRun: run, render.LabelAttempt: attempt}}}
}

// A run's pod reports how far its attempt is; the run records it, paced,
// and nobody else can: not another run's pod, not a pod of another
// namespace, not an ended attempt's, not a token for another audience.
// The token is reviewed once, not at every report.
func TestAPodReportsItsOwnAttemptsProgressAndNoOtherRuns(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	train := builders.MakeTauRun("train", "team-a").UID("run-uid").Phase(taugridv1.PhaseRunning, "running").
		Attempt("train-1", start.Add(-time.Hour), start.Add(-30*time.Minute), taugridv1.FailureInfrastructure).
		Attempt("train-2", start.Add(-20*time.Minute), time.Time{}, "").Obj()
	other := builders.MakeTauRun("other", "team-a").UID("other-uid").Phase(taugridv1.PhaseRunning, "running").
		Attempt("other-1", start, time.Time{}, "").Obj()
	done := builders.MakeTauRun("done", "team-a").UID("done-uid").Phase(taugridv1.PhaseSucceeded, "succeeded").
		Attempt("done-1", start.Add(-time.Hour), start.Add(-time.Minute), "").Obj()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&taugridv1.TauRun{}).WithObjects(train, other, done,
		progressPod("team-a", "train-2-x", "p2", "train", "2"), progressPod("team-a", "train-1-x", "p1", "train", "1"),
		progressPod("team-a", "other-1-x", "po", "other", "1"), progressPod("team-a", "done-1-x", "pd", "done", "1"),
		progressPod("team-b", "train-1-y", "pb", "train", "1")).Build()
	rev := &tokens{aud: render.ProgressTokenAudience, reviews: map[string]int{}, pods: map[string][3]string{
		"tok-train-2": {"team-a", "train-2-x", "p2"}, "tok-train-1": {"team-a", "train-1-x", "p1"},
		"tok-other": {"team-a", "other-1-x", "po"}, "tok-done": {"team-a", "done-1-x", "pd"},
		"tok-team-b": {"team-b", "train-1-y", "pb"}, "tok-replaced": {"team-a", "train-2-x", "an-older-pod"}}}
	p := &Progress{Client: c, Reviewer: rev, Clock: clk}
	post := func(method, path, token, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	recorded := func() *taugridv1.RunProgress {
		var r taugridv1.TauRun
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "train"}, &r); err != nil {
			t.Fatal(err)
		}
		return r.Status.Progress
	}
	const path = "/progress/team-a/train"

	refused := []struct {
		what, method, path, token, body string
		code                            int
	}{
		{"a GET", http.MethodGet, path, "tok-train-2", "", http.StatusMethodNotAllowed},
		{"no token", http.MethodPost, path, "", "0.5", http.StatusUnauthorized},
		{"a token no pod holds", http.MethodPost, path, "tok-forged", "0.5", http.StatusForbidden},
		{"another run's pod", http.MethodPost, path, "tok-other", "0.5", http.StatusForbidden},
		{"a pod of the run's name in another namespace", http.MethodPost, path, "tok-team-b", "0.5", http.StatusForbidden},
		{"a pod of the run's namespace, for the other namespace's run", http.MethodPost, "/progress/team-b/train", "tok-train-2", "0.5", http.StatusForbidden},
		{"a token bound to a pod since replaced", http.MethodPost, path, "tok-replaced", "0.5", http.StatusForbidden},
		{"the run's ended attempt", http.MethodPost, path, "tok-train-1", "0.5", http.StatusConflict},
		{"an ended run", http.MethodPost, "/progress/team-a/done", "tok-done", "1", http.StatusConflict},
		{"not a number", http.MethodPost, path, "tok-train-2", "half", http.StatusBadRequest},
		{"more than all", http.MethodPost, path, "tok-train-2", "1.5", http.StatusBadRequest},
		{"a path with more", http.MethodPost, path + "/x", "tok-train-2", "0.5", http.StatusNotFound},
	}
	for _, r := range refused {
		if code, body := post(r.method, r.path, r.token, r.body); code != r.code {
			t.Errorf("%s: %d %q, want %d", r.what, code, body, r.code)
		}
	}
	if got := recorded(); got != nil {
		t.Fatalf("refused reports recorded %+v", got)
	}
	if _, body := post(http.MethodPost, path, "tok-train-2", "half"); !strings.Contains(body, "expected a fraction from 0 to 1 (0.42) or a percentage from 0 to 100 (42%)") {
		t.Errorf("a bad report is told %q", body)
	}

	steps := []struct {
		after time.Duration
		body  string
		code  int
		want  int32 // recorded percent
	}{
		{0, "0.2", http.StatusOK, 20},                      // the attempt's first
		{10 * time.Second, "25%", http.StatusAccepted, 20}, // 5 points, within a minute: noted
		{10 * time.Second, "0.31", http.StatusOK, 31},      // 11 points
		{time.Minute, "0.33", http.StatusOK, 33},           // a minute later
		{time.Second, "1", http.StatusOK, 100},             // done
	}
	for _, s := range steps {
		clk.SetTime(clk.Now().Add(s.after))
		code, body := post(http.MethodPost, path, "tok-train-2", s.body)
		got := recorded()
		if code != s.code || got == nil || got.Percent != s.want || got.Attempt != 2 {
			t.Errorf("report %q: %d %q, recorded %+v; want %d and %d%% of attempt 2", s.body, code, body, got, s.code, s.want)
		}
	}
	if got := recorded(); !got.Time.Time.Equal(clk.Now()) {
		t.Errorf("recorded at %v, want %v", got.Time, clk.Now())
	}
	// One kept, and one for the report to team-b's path, refused and not kept.
	if n := rev.reviews["tok-train-2"]; n != 2 {
		t.Errorf("%d TokenReviews for 9 reports of one pod, want 2", n)
	}
	// The review is kept 10 minutes, then asked again; an API server that
	// does not answer is "try again", not a refusal.
	clk.SetTime(clk.Now().Add(11 * time.Minute))
	rev.down = true
	if code, _ := post(http.MethodPost, path, "tok-train-2", "1"); code != http.StatusServiceUnavailable {
		t.Errorf("with the API server down: %d, want 503", code)
	}
	// Asked again, and the same 100% is written again 11 minutes on: the
	// run is still there. A token kept for a pod that is gone reports
	// nothing.
	rev.down = false
	if code, _ := post(http.MethodPost, path, "tok-train-2", "1"); code != http.StatusOK || !recorded().Time.Time.Equal(clk.Now()) {
		t.Errorf("the same 100%% 11 minutes on: %d, recorded %+v; want 200, now", code, recorded())
	}
	if n := rev.reviews["tok-train-2"]; n != 4 {
		t.Errorf("%d TokenReviews after the kept one expired, want 4 (one lost to the outage)", n)
	}
	if err := c.Delete(context.Background(), progressPod("team-a", "train-2-x", "p2", "train", "2")); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(http.MethodPost, path, "tok-train-2", "1"); code != http.StatusForbidden {
		t.Errorf("the pod deleted, its kept token: %d, want 403", code)
	}
}

func TestParseProgress(t *testing.T) {
	for in, want := range map[string]int32{"0": 0, "0.42": 42, " 0.425\n": 43, "1": 100, "42%": 42, "100 %": 100, "7.5%": 8} {
		if got, err := ParseProgress(in); err != nil || got != want {
			t.Errorf("ParseProgress(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-0.1", "1.01", "101%", "NaN", "0x1p-2%%", "half", strings.Repeat("9", 100)} {
		if _, err := ParseProgress(in); err == nil {
			t.Errorf("ParseProgress(%q) took it", in)
		} else if len(err.Error()) > 160 {
			t.Errorf("ParseProgress(%q) says %d characters", in, len(err.Error()))
		}
	}
}
