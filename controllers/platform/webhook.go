package platform

import (
	"context"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	key := types.NamespacedName{Namespace: r.Policies.Namespace, Name: p.Spec.Webhook.SecretRef.Name}
	var s corev1.Secret
	err := r.Get(ctx, key, &s)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading webhook Secret %s: %w", key.Name, err)
	}
	path, missing := "", fmt.Sprintf("Secret %s does not exist", key)
	if token := s.Data[gitsource.SecretToken]; err == nil && len(token) > 0 {
		path = taugridv1.WebhookPathPrefix + gitsource.WebhookID("", p.Name, token)
	} else if err == nil {
		missing = fmt.Sprintf("Secret %s has no key %q", key, gitsource.SecretToken)
	}
	if path == "" && (p.Status.WebhookPath != "" || p.Status.LastPollTime == nil) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonMissingSecret, "Webhook",
			"spec.webhook.secretRef: %s: webhook deliveries are refused until it does; polling goes on", missing)
	}
	p.Status.WebhookPath = path
	return nil
}
