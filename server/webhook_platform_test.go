package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// hookWorld is the webhook server's side on a fake client with the
// manager's webhook path indexes: a TauPlatform and a TauRepository of the
// same name, each with spec.webhook and its published path, and a count
// of the Secrets read.
type hookWorld struct {
	c                      client.Client
	h                      http.Handler
	secretReads            int
	clock                  *clocktesting.FakeClock
	platformPath, repoPath string
}

const (
	hookNamespace  = "taugrid-system" // the controller's
	platformSecret = "platform hook secret"
	repoSecret     = "repository hook secret"
)

func newHookWorld(t *testing.T, receiversNamespace string, forge *taugridv1.Forge) *hookWorld {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	w := &hookWorld{
		platformPath: taugridv1.WebhookPathPrefix + gitsource.WebhookID("", "default", []byte(platformSecret)),
		repoPath:     taugridv1.WebhookPathPrefix + gitsource.WebhookID("team-a", "default", []byte(repoSecret)),
	}
	hook := &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: "hook"}}
	platform := &taugridv1.TauPlatform{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:   taugridv1.TauPlatformSpec{GitSource: taugridv1.GitSource{URL: "https://git.example.com/platform.git"}, Webhook: hook, Forge: forge},
		Status: taugridv1.TauPlatformStatus{WebhookPath: w.platformPath}}
	repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"},
		Spec:   taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: "https://git.example.com/models.git"}, Webhook: hook},
		Status: taugridv1.TauRepositoryStatus{WebhookPath: w.repoPath}}
	secret := func(ns, token string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
			Data: map[string][]byte{gitsource.SecretToken: []byte(token)}}
	}
	w.c = fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(platform, repo, secret(hookNamespace, platformSecret), secret("team-a", repoSecret)).
		WithIndex(&taugridv1.TauRepository{}, IndexWebhookPath, WebhookPathOf).
		WithIndex(&taugridv1.TauPlatform{}, IndexPlatformWebhookPath, PlatformWebhookPathOf).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				w.secretReads++
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	w.clock = clocktesting.NewFakeClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	w.h = gitsource.NewWebhookHandler(
		&WebhookReceivers{Client: w.c, Forge: gitsource.ForgeGitHub, Namespace: receiversNamespace},
		&AnnotationNudger{Client: w.c, Clock: w.clock}, gitsource.WebhookOptions{Clock: w.clock})
	return w
}

// deliver posts a GitHub pull_request delivery signed with secret to
// path, and answers the status code.
func (w *hookWorld) deliver(path, secret, delivery string) int {
	body := `{"action":"synchronize","number":7,"pull_request":{"number":7,"head":{"ref":"quota","sha":"1111111111111111111111111111111111111111"}}}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.RemoteAddr = "192.0.2.1:443"
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, req)
	return rec.Code
}

// nudges are the nudge annotations of the platform and of the repository
// named default.
func (w *hookWorld) nudges(t *testing.T) (platform, repo string) {
	t.Helper()
	p := &taugridv1.TauPlatform{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: "default"}, p); err != nil {
		t.Fatal(err)
	}
	r := &taugridv1.TauRepository{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "default"}, r); err != nil {
		t.Fatal(err)
	}
	return p.Annotations[taugridv1.AnnotationNudge], r.Annotations[taugridv1.AnnotationNudge]
}

// A delivery signed with the platform's Secret at the platform's path
// nudges the TauPlatform, not the TauRepository of the same name; a wrong
// signature nudges nothing; an ID no one publishes reads no Secret; the
// repository's path still nudges the repository; a rotated Secret refuses
// the old ID.
func TestAPlatformWebhookDeliveryNudgesThePlatform(t *testing.T) {
	w := newHookWorld(t, hookNamespace, nil)
	if w.platformPath == w.repoPath {
		t.Fatalf("the platform and the repository named default share the path %s", w.platformPath)
	}

	unknown := taugridv1.WebhookPathPrefix + gitsource.WebhookID("", "nobody", []byte("x"))
	if code := w.deliver(unknown, platformSecret, "d-0"); code != http.StatusNotFound {
		t.Errorf("an ID no one publishes answered %d, want 404", code)
	}
	if w.secretReads != 0 {
		t.Errorf("an ID no one publishes read %d Secrets, want none", w.secretReads)
	}

	if code := w.deliver(w.platformPath, "not the secret", "d-1"); code != http.StatusUnauthorized {
		t.Errorf("a forged delivery at the platform's path answered %d, want 401", code)
	}
	if p, r := w.nudges(t); p != "" || r != "" {
		t.Errorf("a forged delivery nudged: platform %q, repository %q", p, r)
	}

	if code := w.deliver(w.platformPath, platformSecret, "d-2"); code != http.StatusAccepted {
		t.Fatalf("a signed delivery at the platform's path answered %d, want 202", code)
	}
	p, r := w.nudges(t)
	if p == "" || r != "" {
		t.Errorf("after the platform's delivery: platform nudged %q, repository %q; want the platform alone", p, r)
	}
	if _, err := time.Parse(time.RFC3339Nano, p); err != nil {
		t.Errorf("the platform's nudge %q is not an RFC 3339 time: %v", p, err)
	}

	if code := w.deliver(w.repoPath, platformSecret, "d-3"); code != http.StatusUnauthorized {
		t.Errorf("the platform's secret at the repository's path answered %d, want 401", code)
	}
	if code := w.deliver(w.repoPath, repoSecret, "d-4"); code != http.StatusAccepted {
		t.Fatalf("a signed delivery at the repository's path answered %d, want 202", code)
	}
	if _, r := w.nudges(t); r == "" {
		t.Errorf("the repository's delivery did not nudge the repository")
	}

	// The Secret rotates: until the next poll publishes the new path, the
	// old ID is refused, once the handler's short-lived receiver cache
	// has let go of it.
	s := &corev1.Secret{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: hookNamespace, Name: "hook"}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[gitsource.SecretToken] = []byte("rotated")
	if err := w.c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(gitsource.DefaultReceiverTTL + time.Second)
	if code := w.deliver(w.platformPath, platformSecret, "d-5"); code != http.StatusNotFound {
		t.Errorf("the old ID after the Secret rotated answered %d, want 404", code)
	}
}

// The receiver of a platform's delivery: no namespace (so the nudger
// nudges the TauPlatform), the platform's name and URL, and the forge of
// spec.forge when set; without the controller's namespace, platforms get
// no deliveries.
func TestAPlatformsWebhookReceiver(t *testing.T) {
	id := strings.TrimPrefix(newHookWorld(t, hookNamespace, nil).platformPath, taugridv1.WebhookPathPrefix)
	for name, tc := range map[string]struct {
		forge *taugridv1.Forge
		want  gitsource.Forge
	}{
		"no spec.forge: the default forge": {want: gitsource.ForgeGitHub},
		"spec.forge gitea":                 {forge: &taugridv1.Forge{Type: "gitea"}, want: gitsource.ForgeGitea},
		"spec.forge gitlab":                {forge: &taugridv1.Forge{Type: "gitlab"}, want: gitsource.ForgeGitLab},
	} {
		t.Run(name, func(t *testing.T) {
			w := newHookWorld(t, hookNamespace, tc.forge)
			rcvs := &WebhookReceivers{Client: w.c, Forge: gitsource.ForgeGitHub, Namespace: hookNamespace}
			rcv, err := rcvs.Receiver(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if rcv.Namespace != "" || rcv.Name != "default" || rcv.RepoURL != "https://git.example.com/platform.git" ||
				rcv.Forge != tc.want || string(rcv.Secret) != platformSecret {
				t.Errorf("receiver %+v: want the platform default's, forge %s", rcv, tc.want)
			}
		})
	}
	t.Run("no controller namespace", func(t *testing.T) {
		w := newHookWorld(t, "", nil)
		if code := w.deliver(w.platformPath, platformSecret, "d-1"); code != http.StatusNotFound {
			t.Errorf("a platform's delivery without the controller's namespace answered %d, want 404", code)
		}
		if w.secretReads != 0 {
			t.Errorf("read %d Secrets, want none", w.secretReads)
		}
	})
}
