package reconciler

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

// WebhookReceivers finds the TauRepository a webhook delivery is for: its
// receiver ID is derived from the repository's webhook secret.
type WebhookReceivers struct {
	Client client.Reader
	Forge  gitsource.Forge
}

// Receiver implements gitsource.Receivers.
func (w *WebhookReceivers) Receiver(ctx context.Context, id string) (gitsource.Receiver, error) {
	var repos taugridv1.TauRepositoryList
	if err := w.Client.List(ctx, &repos); err != nil {
		return gitsource.Receiver{}, err
	}
	for _, repo := range repos.Items {
		if repo.Spec.Webhook == nil {
			continue
		}
		var s corev1.Secret
		key := types.NamespacedName{Namespace: repo.Namespace, Name: repo.Spec.Webhook.SecretRef.Name}
		if err := w.Client.Get(ctx, key, &s); err != nil {
			continue
		}
		secret := s.Data[SecretToken]
		if len(secret) > 0 && gitsource.WebhookID(repo.Namespace, repo.Name, secret) == id {
			forge := w.Forge
			if repo.Spec.Forge != nil {
				forge = gitsource.Forge(repo.Spec.Forge.Type)
			}
			return gitsource.Receiver{Forge: forge, RepoURL: repo.Spec.URL, Secret: secret}, nil
		}
	}
	return gitsource.Receiver{}, fmt.Errorf("receiver %w", gitsource.ErrNotFound)
}

// AnnotationNudger records a nudge as an annotation on every TauRepository
// of a URL: the request survives a controller restart, and the repository
// reconciler polls when the annotation changes.
type AnnotationNudger struct {
	Client client.Client
	Clock  clock.PassiveClock
}

// Nudge implements gitsource.Nudger.
func (n *AnnotationNudger) Nudge(ctx context.Context, repoURL string) error {
	var repos taugridv1.TauRepositoryList
	if err := n.Client.List(ctx, &repos, client.MatchingFields{IndexRepositoryURL: repoURL}); err != nil {
		return err
	}
	stamp := n.Clock.Now().UTC().Format(time.RFC3339Nano)
	for i := range repos.Items {
		repo := &repos.Items[i]
		patch := client.MergeFrom(repo.DeepCopy())
		if repo.Annotations == nil {
			repo.Annotations = map[string]string{}
		}
		repo.Annotations[AnnotationNudge] = stamp
		if err := n.Client.Patch(ctx, repo, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
