package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/taugrid/taugrid/test/chart"
	"github.com/taugrid/taugrid/test/controlplane"
)

// TestTheMetricsAnswerOnlyTheirRBACReaders starts the metrics server as
// main does, under the chart's tau-controller ServiceAccount, on a real
// API server: a tenant's pod that connects gets 401 without a token, 500
// with a made-up one and 403 with its own ServiceAccount's; Prometheus's ServiceAccount, bound to
// the chart's metrics-reader ClusterRole, reads them, over TLS only. With
// --metrics-secure=false (laptops), plain HTTP to anyone, as before.
func TestTheMetricsAnswerOnlyTheirRBACReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real API server; run without -short")
	}
	env := controlplane.ForTest(t, controlplane.Options{})
	admin := kubernetes.NewForConfigOrDie(env.Config)
	installChart(t, env)
	prometheus := token(t, admin, "monitoring", "prometheus")
	attacker := token(t, admin, "team-b", "attacker")

	url := serveMetrics(t, env, true)
	for name, tc := range map[string]struct {
		token string
		code  int
	}{
		"no token": {"", http.StatusUnauthorized},
		// controller-runtime's filter answers 500 "Authentication failed" to
		// a token the TokenReview calls invalid (its authenticator returns
		// the review's error), and does not cache it: refused all the same.
		"a made-up token":           {"made-up", http.StatusInternalServerError},
		"a tenant's ServiceAccount": {attacker, http.StatusForbidden},
		"Prometheus":                {prometheus, http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := scrape(t, "https://"+url+"/metrics", tc.token)
			if code != tc.code {
				t.Errorf("%d %q, want %d", code, body, tc.code)
			}
			if code != http.StatusOK && strings.Contains(body, "# TYPE") {
				t.Errorf("refused, yet served: %s", body)
			}
		})
	}
	if code, _ := scrape(t, "http://"+url+"/metrics", prometheus); code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the secure port: %d, want 400 (the token must not travel in the clear)", code)
	}
	plain := serveMetrics(t, env, false)
	if code, _ := scrape(t, "http://"+plain+"/metrics", ""); code != http.StatusOK {
		t.Errorf("--metrics-secure=false: %d, want 200 without a token", code)
	}
}

// TestMetricsRequestsBeyondTheBoundAreRefusedAtOnce: a caller holding
// connections open cannot queue requests without end behind the reviews.
func TestMetricsRequestsBeyondTheBoundAreRefusedAtOnce(t *testing.T) {
	hold, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := limitInFlight(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		once.Do(func() { close(held) })
		<-hold
	}), 1)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}()
	<-held
	code, _ := scrape(t, srv.URL, "")
	close(hold)
	<-done
	if code != http.StatusTooManyRequests {
		t.Errorf("a second request while one is served: %d, want 429", code)
	}
}

// installChart creates the chart's controller RBAC and its metrics-reader
// ClusterRole bound to monitoring/prometheus (metrics.readers).
func installChart(t *testing.T, env *controlplane.Env) {
	t.Helper()
	r, err := chart.Render(chart.Namespace, map[string]any{"metrics": map[string]any{"readers": []any{
		map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{chart.Namespace, "monitoring", "team-b"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, u := range r.Kinds("ServiceAccount", "ClusterRole", "ClusterRoleBinding") {
		if n := u.GetName(); n == "tau-controller" || n == "taugrid-metrics-reader" {
			if err := env.Client.Create(ctx, u); err != nil {
				t.Fatalf("%s %s: %v", u.GetKind(), n, err)
			}
		}
	}
}

// serveMetrics starts the metrics server with main's options (secure or
// not), acting as the chart's controller ServiceAccount, and returns its
// address.
func serveMetrics(t *testing.T, env *controlplane.Env, secure bool) string {
	t.Helper()
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + chart.Namespace + ":tau-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + chart.Namespace, "system:authenticated"}}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(metricsOptions(options{metricsAddr: addr, metricsSecure: secure}), cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Start(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	scheme := map[bool]string{true: "https", false: "http"}[secure]
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := scrape(t, scheme+"://"+addr+"/metrics", ""); code != 0 {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics server did not answer at %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// token is a token of ServiceAccount ns/name (created), for the API
// server's audience, as a pod's.
func token(t *testing.T, c kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrape GETs url with token ("": none), trusting any certificate as
// Prometheus's insecureSkipVerify does; 0 when nothing answers.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
