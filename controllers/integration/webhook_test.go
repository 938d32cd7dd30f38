package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretReads counts the Secrets read through it.
type secretReads struct {
	client.Reader
	n atomic.Int32
}

func (c *secretReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.n.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// cachedRepos reads TauRepositories from an informer cache indexed as the
// controller's manager indexes them, and everything else (Secrets) from
// the API server, counted: the controller's manager client, in small.
type cachedRepos struct {
	*secretReads
	repos cache.Cache
}

func (c *cachedRepos) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.repos.List(ctx, list, opts...)
}

func newCachedRepos(t *testing.T) *cachedRepos {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.IndexField(ctx, &taugridv1.TauRepository{}, server.IndexWebhookPath, server.WebhookPathOf); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &taugridv1.TauRepository{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return &cachedRepos{secretReads: &secretReads{Reader: k8s}, repos: c}
}

// waitForPath waits until the cache shows the repository at path.
func (c *cachedRepos) waitForPath(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var l taugridv1.TauRepositoryList
		if err := c.repos.List(context.Background(), &l, client.MatchingFields{server.IndexWebhookPath: path}); err == nil && len(l.Items) == 1 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the cache never showed a repository at %s", path)
}

type countNudges struct{ n atomic.Int32 }

func (c *countNudges) Nudge(context.Context, gitsource.Receiver) error { c.n.Add(1); return nil }

// webhookRepo creates a TauRepository with a webhook Secret and polls it,
// so its status publishes the receiver path; it returns the path.
func webhookRepo(t *testing.T, f *runFixture, name, secret string) string {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Data: map[string][]byte{gitsource.SecretToken: []byte(secret)}}
	repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: "https://git.example.com/" + name + ".git"}, Platform: "none",
			Interval: metav1.Duration{Duration: time.Minute}, Webhook: &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: name}}}}
	for _, o := range []client.Object{s, repo} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.repos.Reconcile(ctx, requestFor(repo)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
		t.Fatal(err)
	}
	want := taugridv1.WebhookPathPrefix + gitsource.WebhookID(f.ns, name, []byte(secret))
	if repo.Status.WebhookPath != want {
		t.Fatalf("status.webhookPath = %q, want %q", repo.Status.WebhookPath, want)
	}
	return want
}

func signedPush(path, secret, delivery string) *http.Request {
	body := `{"ref":"refs/tags/run/x","before":"0000000000000000000000000000000000000000","after":"1111111111111111111111111111111111111111"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.RemoteAddr = "192.0.2.1:443"
	return req
}

func serveHook(h http.Handler, req *http.Request) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// Receivers are found by the path the repository publishes: a flood of
// unknown IDs, from one client or many, costs no Secret read; a known ID
// costs one; a forged signature on a known ID is bounded per client; a
// stale ID (the Secret rotated since the last poll) is refused after one
// read, and the next poll publishes the new path.
func TestWebhookReceiversFindRepositoriesByTheirPublishedPath(t *testing.T) {
	f := newRunFixture(t, "rw1")
	reads := newCachedRepos(t)
	var paths []string
	for _, name := range []string{"hooked-1", "hooked-2", "hooked-3"} {
		paths = append(paths, webhookRepo(t, f, name, name+"-secret"))
	}
	for _, p := range paths {
		reads.waitForPath(t, p)
	}
	nudges := &countNudges{}
	clients := atomic.Int32{}
	h := gitsource.NewWebhookHandler(&server.WebhookReceivers{Client: reads, Forge: gitsource.ForgeGitHub}, nudges,
		gitsource.WebhookOptions{ClientKey: func(r *http.Request) string {
			if r.RemoteAddr == "192.0.2.1:443" {
				return "forge"
			}
			return fmt.Sprintf("stranger-%d", clients.Add(1)) // every stranger a new address: no limit helps
		}})

	t.Run("1,000 unknown IDs, 50 at a time, read no Secret", func(t *testing.T) {
		var wg sync.WaitGroup
		var notFound atomic.Int32
		for g := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					sum := sha256.Sum256(fmt.Appendf(nil, "guess-%d-%d", g, i))
					id := hex.EncodeToString(sum[:])
					if i%2 == 1 {
						id = fmt.Sprintf("not-hex-%d", i)
					}
					req := httptest.NewRequest(http.MethodPost, taugridv1.WebhookPathPrefix+id, strings.NewReader("{}"))
					req.RemoteAddr = "203.0.113.9:1234"
					if serveHook(h, req) == http.StatusNotFound {
						notFound.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if notFound.Load() != 1000 || reads.n.Load() != 0 {
			t.Errorf("1,000 unknown IDs: %d answered 404, %d Secret reads; want 1,000 and 0", notFound.Load(), reads.n.Load())
		}
	})
	t.Run("a known ID reads its Secret once and nudges", func(t *testing.T) {
		before := reads.n.Load()
		if code := serveHook(h, signedPush(paths[1], "hooked-2-secret", "d-1")); code != http.StatusAccepted {
			t.Fatalf("a signed delivery got %d, want 202", code)
		}
		if got := reads.n.Load() - before; got != 1 || nudges.n.Load() != 1 {
			t.Errorf("one delivery: %d Secret reads, %d nudges; want 1 and 1", got, nudges.n.Load())
		}
	})
	t.Run("forged signatures on a known ID cost one Secret read and are bounded per client", func(t *testing.T) {
		// The handler as the controller builds it: clients are addresses.
		// A still clock: no budget is earned back during the flood.
		fh := gitsource.NewWebhookHandler(&server.WebhookReceivers{Client: reads, Forge: gitsource.ForgeGitHub}, nudges,
			gitsource.WebhookOptions{Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
		before := reads.n.Load()
		limited := 0
		for i := range 200 {
			req := signedPush(paths[0], "a guess", fmt.Sprintf("forged-%d", i))
			req.RemoteAddr = "203.0.113.50:1"
			if serveHook(fh, req) == http.StatusTooManyRequests {
				limited++
			}
		}
		// The receiver found is kept for 10 s: one read, whatever the flood.
		if got := reads.n.Load() - before; got != 1 || limited != 200-gitsource.DefaultClientBurst {
			t.Errorf("200 forged deliveries from one client: %d Secret reads, %d answered 429; want 1 and %d",
				got, limited, 200-gitsource.DefaultClientBurst)
		}
	})
	t.Run("a rotated Secret: the stale ID is refused after one read, the next poll publishes the new path", func(t *testing.T) {
		ctx := context.Background()
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hooked-3"}, s); err != nil {
			t.Fatal(err)
		}
		s.Data[gitsource.SecretToken] = []byte("rotated")
		if err := k8s.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		before := reads.n.Load()
		if code := serveHook(h, signedPush(paths[2], "hooked-3-secret", "d-2")); code != http.StatusNotFound {
			t.Errorf("a delivery to the stale path got %d, want 404", code)
		}
		if got := reads.n.Load() - before; got != 1 {
			t.Errorf("the stale ID read %d Secrets, want 1 (no rescan)", got)
		}
		repo := &taugridv1.TauRepository{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hooked-3"}, repo); err != nil {
			t.Fatal(err)
		}
		if _, err := f.repos.Reconcile(ctx, requestFor(repo)); err != nil {
			t.Fatal(err)
		}
		fresh := taugridv1.WebhookPathPrefix + gitsource.WebhookID(f.ns, "hooked-3", []byte("rotated"))
		reads.waitForPath(t, fresh)
		if code := serveHook(h, signedPush(fresh, "rotated", "d-3")); code != http.StatusAccepted {
			t.Errorf("a delivery to the new path got %d, want 202", code)
		}
	})
}
