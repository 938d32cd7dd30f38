package reconciler

import (
	"context"
	"fmt"
	"sync"
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
// receiver ID is derived from the repository's webhook secret. Secrets are
// read from the API server, not a cache, so it remembers which repository
// each ID belonged to at its last scan: a delivery costs one Secret read,
// and an unknown ID a scan of every webhook repository, at most one per
// rescanEvery (IDs are unguessable; an unknown one is a new repository or
// a stranger, and polling covers the new repository meanwhile).
type WebhookReceivers struct {
	Client client.Reader
	Forge  gitsource.Forge
	Clock  clock.PassiveClock

	mu       sync.Mutex
	ids      map[string]types.NamespacedName // receiver ID -> repository, as of the last scan
	lastScan time.Time
}

// rescanEvery bounds full scans for unknown receiver IDs.
const rescanEvery = 5 * time.Second

// Receiver implements gitsource.Receivers.
func (w *WebhookReceivers) Receiver(ctx context.Context, id string) (gitsource.Receiver, error) {
	w.mu.Lock()
	key, known := w.ids[id]
	scan := !known && (w.ids == nil || w.Clock.Now().Sub(w.lastScan) >= rescanEvery)
	w.mu.Unlock()
	if known {
		repo := &taugridv1.TauRepository{}
		if err := w.Client.Get(ctx, key, repo); client.IgnoreNotFound(err) != nil {
			return gitsource.Receiver{}, err
		} else if err == nil {
			if rc, ok := w.receiverOf(ctx, repo, id); ok {
				return rc, nil
			}
		}
		scan = true // the repository or its secret changed
	}
	if !scan {
		return gitsource.Receiver{}, fmt.Errorf("receiver %w", gitsource.ErrNotFound)
	}
	return w.rescan(ctx, id)
}

// rescan reads every webhook repository's secret and remembers its ID.
func (w *WebhookReceivers) rescan(ctx context.Context, id string) (gitsource.Receiver, error) {
	var repos taugridv1.TauRepositoryList
	if err := w.Client.List(ctx, &repos); err != nil {
		return gitsource.Receiver{}, err
	}
	ids := map[string]types.NamespacedName{}
	found, ok := gitsource.Receiver{}, false
	for i := range repos.Items {
		repo := &repos.Items[i]
		secret := w.secretOf(ctx, repo)
		if len(secret) == 0 {
			continue
		}
		rid := gitsource.WebhookID(repo.Namespace, repo.Name, secret)
		ids[rid] = client.ObjectKeyFromObject(repo)
		if rid == id {
			found, ok = w.receiver(repo, secret), true
		}
	}
	w.mu.Lock()
	w.ids, w.lastScan = ids, w.Clock.Now()
	w.mu.Unlock()
	if !ok {
		return gitsource.Receiver{}, fmt.Errorf("receiver %w", gitsource.ErrNotFound)
	}
	return found, nil
}

// receiverOf is the repository's receiver if id is still its ID.
func (w *WebhookReceivers) receiverOf(ctx context.Context, repo *taugridv1.TauRepository, id string) (gitsource.Receiver, bool) {
	secret := w.secretOf(ctx, repo)
	if len(secret) == 0 || gitsource.WebhookID(repo.Namespace, repo.Name, secret) != id {
		return gitsource.Receiver{}, false
	}
	return w.receiver(repo, secret), true
}

// secretOf reads a repository's webhook secret; nil without one.
func (w *WebhookReceivers) secretOf(ctx context.Context, repo *taugridv1.TauRepository) []byte {
	if repo.Spec.Webhook == nil {
		return nil
	}
	var s corev1.Secret
	if err := w.Client.Get(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: repo.Spec.Webhook.SecretRef.Name}, &s); err != nil {
		return nil
	}
	return s.Data[SecretToken]
}

func (w *WebhookReceivers) receiver(repo *taugridv1.TauRepository, secret []byte) gitsource.Receiver {
	forge := w.Forge
	if repo.Spec.Forge != nil {
		forge = gitsource.Forge(repo.Spec.Forge.Type)
	}
	return gitsource.Receiver{Forge: forge, RepoURL: repo.Spec.URL, Secret: secret}
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
