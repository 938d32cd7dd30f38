package repository

import (
	"context"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taugrid/taugrid/controllers/shared"
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
	secret := types.NamespacedName{Namespace: repo.Namespace, Name: repo.Spec.Webhook.SecretRef.Name}
	path, missing, err := shared.WebhookPath(ctx, r.Client, secret, repo.Namespace, repo.Name)
	if err != nil {
		return err
	}
	if path == "" && (repo.Status.WebhookPath != "" || repo.Status.LastPollTime == nil) {
		r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, ReasonMissingSecret, "Webhook",
			"spec.webhook.secretRef: %s: webhook deliveries are refused until it does; polling goes on", missing)
	}
	repo.Status.WebhookPath = path
	return nil
}
