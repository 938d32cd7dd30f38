package shared

import (
	"context"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WebhookPath is the receiver path an object publishes in
// status.webhookPath: WebhookPathPrefix and the ID of its namespace
// ("" for a cluster-scoped TauPlatform), its name and the token of the
// webhook Secret secret. When the Secret or its key is missing, path is
// "" and missing says which; err is a read that failed.
func WebhookPath(ctx context.Context, c client.Reader, secret types.NamespacedName, namespace, name string) (path, missing string, err error) {
	var s corev1.Secret
	switch err := c.Get(ctx, secret, &s); {
	case apierrors.IsNotFound(err):
		return "", fmt.Sprintf("Secret %s does not exist", secret), nil
	case err != nil:
		return "", "", fmt.Errorf("reading webhook Secret %s: %w", secret.Name, err)
	}
	token := s.Data[gitsource.SecretToken]
	if len(token) == 0 {
		return "", fmt.Sprintf("Secret %s has no key %q", secret, gitsource.SecretToken), nil
	}
	return taugridv1.WebhookPathPrefix + gitsource.WebhookID(namespace, name, token), "", nil
}
