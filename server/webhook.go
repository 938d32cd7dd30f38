package server

import (
	"context"
	"fmt"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IndexRepositoryURL indexes TauRepositories by spec.url, so a webhook
// delivery finds its repositories without a full list scan.
const IndexRepositoryURL = "spec.url"

// RepositoryURL is the index function for IndexRepositoryURL.
func RepositoryURL(o client.Object) []string {
	return []string{o.(*taugridv1.TauRepository).Spec.URL}
}

// IndexWebhookPath indexes TauRepositories by status.webhookPath, so a
// delivery finds its repository in the cache, without reading any Secret.
const IndexWebhookPath = "status.webhookPath"

// WebhookPathOf is the index function for IndexWebhookPath.
func WebhookPathOf(o client.Object) []string {
	if p := o.(*taugridv1.TauRepository).Status.WebhookPath; p != "" {
		return []string{p}
	}
	return nil
}

// IndexPlatformWebhookPath indexes TauPlatforms by status.webhookPath.
const IndexPlatformWebhookPath = "status.webhookPath"

// PlatformWebhookPathOf is the index function for IndexPlatformWebhookPath.
func PlatformWebhookPathOf(o client.Object) []string {
	if p := o.(*taugridv1.TauPlatform).Status.WebhookPath; p != "" {
		return []string{p}
	}
	return nil
}

// WebhookReceivers finds the TauRepository a webhook delivery is for, by
// the receiver path each repository publishes in status.webhookPath,
// looked up in the manager's cache (IndexWebhookPath). An ID no repository
// publishes is answered from the cache alone: strangers cost no Secret
// read. A published ID costs one Secret read (the HMAC key; the webhook
// handler keeps a receiver found for 10 seconds), and is refused if the
// Secret no longer gives that ID (rotated since the last poll). The
// handler's limits on refused requests bound the rest.
type WebhookReceivers struct {
	// Client lists TauRepositories from a cache indexed by
	// IndexWebhookPath and reads Secrets from the API server.
	Client client.Reader
	Forge  gitsource.Forge
	// Namespace holds the webhook Secrets of TauPlatforms (cluster-scoped:
	// the controller's namespace); "": platforms get no deliveries.
	Namespace string
}

// Receiver implements gitsource.Receivers.
func (w *WebhookReceivers) Receiver(ctx context.Context, id string) (gitsource.Receiver, error) {
	if !isWebhookID(id) {
		return gitsource.Receiver{}, fmt.Errorf("receiver %w", gitsource.ErrNotFound)
	}
	var repos taugridv1.TauRepositoryList
	if err := w.Client.List(ctx, &repos, client.MatchingFields{IndexWebhookPath: taugridv1.WebhookPathPrefix + id}); err != nil {
		return gitsource.Receiver{}, err
	}
	for i := range repos.Items {
		repo := &repos.Items[i]
		secret, err := w.secretOf(ctx, repo)
		if err != nil {
			return gitsource.Receiver{}, err
		}
		if len(secret) > 0 && gitsource.WebhookID(repo.Namespace, repo.Name, secret) == id {
			return w.receiver(repo, secret), nil
		}
	}
	return w.platformReceiver(ctx, id)
}

// platformReceiver finds the TauPlatform that publishes id. Its receiver
// has no namespace (TauPlatforms are cluster-scoped; no TauRepository
// lacks one, so the two never share an ID), which the nudger reads as a
// platform.
func (w *WebhookReceivers) platformReceiver(ctx context.Context, id string) (gitsource.Receiver, error) {
	if w.Namespace == "" {
		return gitsource.Receiver{}, fmt.Errorf("receiver %w", gitsource.ErrNotFound)
	}
	var platforms taugridv1.TauPlatformList
	if err := w.Client.List(ctx, &platforms, client.MatchingFields{IndexPlatformWebhookPath: taugridv1.WebhookPathPrefix + id}); err != nil {
		return gitsource.Receiver{}, err
	}
	for i := range platforms.Items {
		p := &platforms.Items[i]
		if p.Spec.Webhook == nil {
			continue
		}
		secret, err := w.token(ctx, types.NamespacedName{Namespace: w.Namespace, Name: p.Spec.Webhook.SecretRef.Name})
		if err != nil {
			return gitsource.Receiver{}, err
		}
		if len(secret) > 0 && gitsource.WebhookID("", p.Name, secret) == id {
			forge := w.Forge
			if p.Spec.Forge != nil {
				forge = gitsource.Forge(p.Spec.Forge.Type)
			}
			return gitsource.Receiver{Forge: forge, RepoURL: p.Spec.URL, Name: p.Name, Secret: secret}, nil
		}
	}
	return gitsource.Receiver{}, fmt.Errorf("receiver %w", gitsource.ErrNotFound)
}

// isWebhookID: IDs are hex SHA-256 digests; anything else is not looked up.
func isWebhookID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// secretOf reads a repository's webhook secret; nil without one.
func (w *WebhookReceivers) secretOf(ctx context.Context, repo *taugridv1.TauRepository) ([]byte, error) {
	if repo.Spec.Webhook == nil {
		return nil, nil
	}
	return w.token(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: repo.Spec.Webhook.SecretRef.Name})
}

// token is a webhook Secret's token; nil when the Secret is gone.
func (w *WebhookReceivers) token(ctx context.Context, key types.NamespacedName) ([]byte, error) {
	var s corev1.Secret
	if err := w.Client.Get(ctx, key, &s); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return s.Data[gitsource.SecretToken], nil
}

func (w *WebhookReceivers) receiver(repo *taugridv1.TauRepository, secret []byte) gitsource.Receiver {
	forge := w.Forge
	if repo.Spec.Forge != nil {
		forge = gitsource.Forge(repo.Spec.Forge.Type)
	}
	return gitsource.Receiver{Forge: forge, RepoURL: repo.Spec.URL, Namespace: repo.Namespace, Name: repo.Name, Secret: secret}
}

// AnnotationNudger records a nudge as an annotation on one TauRepository:
// the request survives a controller restart, and the repository
// reconciler polls when the annotation changes. A nudge names the
// repository it is for (a webhook's receiver, a tenant's own repository),
// never a URL: another team's repository of the same URL is polled on its
// own schedule and its own credentials, whoever pushes.
type AnnotationNudger struct {
	Client client.Client
	Clock  clock.PassiveClock
}

// Nudge implements gitsource.Nudger: the receiver's repository is polled.
func (n *AnnotationNudger) Nudge(ctx context.Context, rcv gitsource.Receiver) error {
	if rcv.Namespace == "" { // a TauPlatform's receiver
		return n.nudgePlatform(ctx, rcv.Name)
	}
	return n.NudgeRepository(ctx, rcv.Namespace, rcv.Name, 0)
}

// nudgePlatform asks TauPlatform name to poll now: its reconciler runs
// when the annotation changes.
func (n *AnnotationNudger) nudgePlatform(ctx context.Context, name string) error {
	p := &taugridv1.TauPlatform{}
	if err := n.Client.Get(ctx, types.NamespacedName{Name: name}, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[taugridv1.AnnotationNudge] = n.Clock.Now().UTC().Format(time.RFC3339Nano)
	return client.IgnoreNotFound(n.Client.Patch(ctx, p, patch))
}

// NudgeRepository asks for one repository to be polled now, unless it was
// nudged less than spacing ago: then the poll that nudge asked for, or the
// next one at the repository's interval, sees what this one would, and
// nothing is written.
func (n *AnnotationNudger) NudgeRepository(ctx context.Context, namespace, name string, spacing time.Duration) error {
	repo := &taugridv1.TauRepository{}
	if err := n.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, repo); err != nil {
		return client.IgnoreNotFound(err)
	}
	now := n.Clock.Now().UTC()
	if last, err := time.Parse(time.RFC3339Nano, repo.Annotations[taugridv1.AnnotationNudge]); err == nil && spacing > 0 && now.Sub(last) < spacing {
		return nil
	}
	patch := client.MergeFrom(repo.DeepCopy())
	if repo.Annotations == nil {
		repo.Annotations = map[string]string{}
	}
	repo.Annotations[taugridv1.AnnotationNudge] = now.Format(time.RFC3339Nano)
	return client.IgnoreNotFound(n.Client.Patch(ctx, repo, patch))
}
