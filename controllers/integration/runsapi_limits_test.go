package integration

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// endlessLogs is a pod log that never ends: one line, then nothing until
// the reader goes away, like a quiet training job followed with -f.
type endlessLogs struct {
	mu   sync.Mutex
	open int
}

func (l *endlessLogs) Logs(ctx context.Context, _, _ string, _ *corev1.PodLogOptions) (io.ReadCloser, error) {
	l.mu.Lock()
	l.open++
	l.mu.Unlock()
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, "epoch 1\n")
		<-ctx.Done()
		l.mu.Lock()
		l.open--
		l.mu.Unlock()
		pw.CloseWithError(ctx.Err())
	}()
	return pr, nil
}

func (l *endlessLogs) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// apiLimitsFixture is a tenant namespace with one run and its pod, two
// tokens for it and one for another team, and the runs API over them.
type apiLimitsFixture struct {
	ns, run string
	logs    *endlessLogs
	srv     *httptest.Server
}

func newAPILimitsFixture(t testing.TB, maxFollows int) *apiLimitsFixture {
	t.Helper()
	ctx := context.Background()
	tenant, tokens := createNamespace(t, "api-lim-"), createNamespace(t, "api-tok-")
	f := &apiLimitsFixture{ns: tenant, run: "run-1", logs: &endlessLogs{}}
	run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: f.run},
		Spec: taugridv1.TauRunSpec{Repository: "r", Commit: strings.Repeat("a", 40), Target: "default",
			Trigger: taugridv1.Trigger{Kind: "RunRef", Ref: "refs/tau/runs/run-1"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "run-1-0", Labels: map[string]string{render.LabelRun: f.run}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	for _, o := range []client.Object{run, pod} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for name, ns := range map[string]string{"token-a": tenant, "token-b": tenant, "token-other": "someone-else"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tokens, Name: name, Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{taugridv1.APITokenKey: []byte(name + "-value"), taugridv1.APINamespaceKey: []byte(ns)}}
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	api := &server.RunsAPI{Client: k8s, Logs: f.logs, MaxFollows: maxFollows,
		Tokens: &server.Tokens{Reader: k8s, Namespace: tokens, Clock: clock.RealClock{}}}
	f.srv = httptest.NewServer(api.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// follow starts following the run's log with token and returns the
// response status, its first line, and a function that stops following.
func (f *apiLimitsFixture) follow(t *testing.T, token string) (int, string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/api/v1/namespaces/"+f.ns+"/runs/"+f.run+"/logs?follow=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the returned stop closes it
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	return resp.StatusCode, line, func() { cancel(); resp.Body.Close() }
}

func TestATokenFollowsOnlySoManyLogsAtOnceAndAnotherTokenIsNotHeldBack(t *testing.T) {
	integration(t)
	f := newAPILimitsFixture(t, 2)
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for i := range 2 {
		code, line, stop := f.follow(t, "token-a-value")
		stops = append(stops, stop)
		if code != http.StatusOK || line != "epoch 1\n" {
			t.Fatalf("follow %d of token A: %d %q, want 200 and the log", i+1, code, line)
		}
	}
	code, body, stop := f.follow(t, "token-a-value")
	stop()
	if code != http.StatusTooManyRequests || !strings.Contains(body, "this token already follows 2 logs") {
		t.Errorf("third follow of token A: %d %q, want 429 saying it follows 2 already", code, body)
	}
	code, line, stop := f.follow(t, "token-b-value")
	stops = append(stops, stop)
	if code != http.StatusOK || line != "epoch 1\n" {
		t.Errorf("token B while A is at its cap: %d %q, want 200 and the log", code, line)
	}
	// Once A stops one follow, it may start another.
	stops[0]()
	for deadline := time.Now().Add(10 * time.Second); f.logs.count() > 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d log streams still open after token A stopped one", f.logs.count())
		}
	}
	code, _, stop = f.follow(t, "token-a-value")
	stops = append(stops, stop)
	if code != http.StatusOK {
		t.Errorf("token A after stopping a follow: %d, want 200", code)
	}
}

// FuzzRunsAPIHandler sends the runs API arbitrary requests: whatever the
// method, path, token and body, it answers with a documented status and a
// JSON error, and reads a namespace only with that namespace's token.
func FuzzRunsAPIHandler(f *testing.F) {
	f.Add("GET", "/api/v1/namespaces/{ns}/runs", "token-a-value", "")
	f.Add("GET", "/api/v1/namespaces/{ns}/runs/run-1/logs?tail=-1", "token-a-value", "")
	f.Add("GET", "/api/v1/namespaces/{ns}/runs/run-1/logs?tail=99999999999999999999", "token-a-value", "")
	f.Add("GET", "/api/v1/namespaces/{ns}/runs/..%2f..%2fsecrets", "token-a-value", "")
	f.Add("GET", "/api/v1/namespaces/{ns}/runs/run-1/diagnosis", "token-other-value", "")
	f.Add("POST", "/api/v1/namespaces/{ns}/nudge", "token-a-value", `{"repository": 7}`)
	f.Add("POST", "/api/v1/namespaces/{ns}/nudge", "", strings.Repeat("{", 5000))
	f.Add("GET", "/api/v1/namespaces/kube-system/runs", "token-a-value", "")
	f.Add("DELETE", "/api/v1/namespaces/{ns}/runs/run-1", "token-a-value", "")
	integration(f)
	fx := newAPILimitsFixture(f, 2)
	f.Fuzz(func(t *testing.T, method, path, token, body string) {
		path = strings.ReplaceAll(path, "{ns}", fx.ns)
		req, err := http.NewRequest(method, fx.srv.URL+"/"+strings.TrimPrefix(path, "/"), strings.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		switch resp.StatusCode {
		case 200, 202, 400, 401, 403, 404, 405, 429, 502:
		default:
			t.Fatalf("%s %s: status %d", method, path, resp.StatusCode)
		}
		if resp.StatusCode == 200 && (token != "token-a-value" && token != "token-b-value" || !strings.Contains(req.URL.Path, "/namespaces/"+fx.ns+"/")) {
			t.Fatalf("%s %s with token %q: 200, want it refused", method, path, token)
		}
	})
}

// createNamespace creates a namespace named prefix and a random suffix.
func createNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
