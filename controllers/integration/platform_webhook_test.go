package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A TauPlatform with spec.webhook publishes its receiver path; a delivery
// signed with its Secret at that path nudges the platform (its reconciler
// polls and previews pull requests at once), a forged signature nudges
// nothing, and the Secret's removal clears the path.
func TestAPlatformWebhookNudgesThePlatform(t *testing.T) {
	f := newPlatform(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: f.name + "-hook", Namespace: "default"},
		Data: map[string][]byte{gitsource.SecretToken: []byte("platform hook secret")}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	p := f.reconcile(t)
	base := p.DeepCopy()
	p.Spec.Webhook = &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: secret.Name}}
	if err := k8s.Patch(ctx, p, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	path := taugridv1.WebhookPathPrefix + gitsource.WebhookID("", f.name, secret.Data[gitsource.SecretToken])
	if got := f.reconcile(t).Status.WebhookPath; got != path {
		t.Fatalf("status.webhookPath = %q, want %q", got, path)
	}

	// The webhook server's reads: platforms from an indexed cache, as the
	// controller's manager has them; Secrets from the API server.
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, ix := range []struct {
		obj client.Object
		f   string
		fn  client.IndexerFunc
	}{
		{&taugridv1.TauRepository{}, server.IndexWebhookPath, server.WebhookPathOf},
		{&taugridv1.TauPlatform{}, server.IndexPlatformWebhookPath, server.PlatformWebhookPathOf},
	} {
		if err := c.IndexField(cctx, ix.obj, ix.f, ix.fn); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = c.Start(cctx) }()
	reads := &cachedRepos{secretReads: &secretReads{Reader: k8s}, repos: c}
	nudger := &server.AnnotationNudger{Client: k8s, Clock: clock.RealClock{}}
	h := gitsource.NewWebhookHandler(&server.WebhookReceivers{Client: reads, Forge: gitsource.ForgeGitHub, Namespace: "default"}, nudger, gitsource.WebhookOptions{})
	nudged := func() string {
		var got taugridv1.TauPlatform
		if err := k8s.Get(ctx, client.ObjectKey{Name: f.name}, &got); err != nil {
			t.Fatal(err)
		}
		return got.Annotations[taugridv1.AnnotationNudge]
	}

	deadline := time.Now().Add(10 * time.Second)
	code := 0
	for time.Now().Before(deadline) { // until the cache shows the path
		if code = serveHook(h, signedPush(path, "platform hook secret", "d-1")); code == http.StatusAccepted {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusAccepted || nudged() == "" {
		t.Fatalf("a signed delivery at the platform's path answered %d; the platform's nudge annotation is %q", code, nudged())
	}
	// Once the path is known, a forged signature there is refused and
	// nudges nothing.
	before := nudged()
	if code := serveHook(h, signedPush(path, "not the secret", "d-forged")); code != http.StatusUnauthorized || nudged() != before {
		t.Errorf("a forged delivery at the platform's path answered %d (want 401); nudge %q → %q", code, before, nudged())
	}

	if err := k8s.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if got := f.reconcile(t).Status.WebhookPath; got != "" {
		t.Errorf("status.webhookPath = %q after its Secret went, want none", got)
	}
}
