package platform

import (
	"context"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taugrid/taugrid/controllers/shared"
)

// ReasonMissingSecret: spec.webhook names a Secret, or a key, that is not
// there; deliveries are refused and polling goes on.
const ReasonMissingSecret = "MissingSecret"

// reconcileWebhook publishes the platform's receiver path in
// status.webhookPath, from spec.webhook's Secret in the controller's
// namespace, so the webhook server finds the platform there and the
// platform team knows what to give the forge. A missing Secret or key
// clears it, with a warning when the path goes away or on the first poll.
func (r *PlatformReconciler) reconcileWebhook(ctx context.Context, p *taugridv1.TauPlatform) error {
	if p.Spec.Webhook == nil {
		p.Status.WebhookPath = ""
		return nil
	}
	secret := types.NamespacedName{Namespace: r.Policies.Namespace, Name: p.Spec.Webhook.SecretRef.Name}
	path, missing, err := shared.WebhookPath(ctx, r.Client, secret, "", p.Name)
	if err != nil {
		return err
	}
	if path == "" && (p.Status.WebhookPath != "" || p.Status.LastPollTime == nil) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonMissingSecret, "Webhook",
			"spec.webhook.secretRef: %s: webhook deliveries are refused until it does; polling goes on", missing)
	}
	p.Status.WebhookPath = path
	return nil
}
