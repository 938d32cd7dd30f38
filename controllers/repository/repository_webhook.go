package repository

import (
	"context"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reconcileWebhook publishes the repository's receiver path in
// status.webhookPath, read from its webhook Secret, so the receiver finds
// it there and people know what URL to give the forge. A missing Secret
// clears the path (deliveries are refused; polling goes on) and raises a
// Warning when the path goes away or on the first poll.
func (r *RepositoryReconciler) reconcileWebhook(ctx context.Context, repo *taugridv1.TauRepository) error {
	if repo.Spec.Webhook == nil {
		repo.Status.WebhookPath = ""
		return nil
	}
	name := repo.Spec.Webhook.SecretRef.Name
	var s corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: name}, &s)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading webhook Secret %s: %w", name, err)
	}
	path, missing := "", fmt.Sprintf("Secret %s/%s does not exist", repo.Namespace, name)
	if token := s.Data[gitsource.SecretToken]; err == nil && len(token) > 0 {
		path = taugridv1.WebhookPathPrefix + gitsource.WebhookID(repo.Namespace, repo.Name, token)
	} else if err == nil {
		missing = fmt.Sprintf("Secret %s/%s has no key %q", repo.Namespace, name, gitsource.SecretToken)
	}
	if path == "" && (repo.Status.WebhookPath != "" || repo.Status.LastPollTime == nil) {
		r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, ReasonMissingSecret, "Webhook",
			"spec.webhook.secretRef: %s: webhook deliveries are refused until it does; polling goes on", missing)
	}
	repo.Status.WebhookPath = path
	return nil
}
