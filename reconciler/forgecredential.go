package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// forgeCredentialTTL is how long a forge Secret read is used before it is
// read again. Secrets are never cached or watched (see ClientOptions), so
// a rotated token is seen within this time, and at once after a post
// fails other than for the budget.
const forgeCredentialTTL = time.Minute

// forgeCredential is a forge Secret's data as last read
// (ForgeReconciler.creds), in memory only: never logged, written or put in
// an error. Runs waiting for the credential's budget retry every second or
// so; without it each try read the Secret from the API server before it
// could find the budget spent (9,006 GETs in 90 idle seconds at 1,000
// runs, hack/scale).
type forgeCredential struct {
	data map[string][]byte
	read time.Time
}

// forgeSecret returns the data of the forge Secret key, read at most once
// per forgeCredentialTTL. Treat it as read-only.
func (r *ForgeReconciler) forgeSecret(ctx context.Context, key types.NamespacedName) (map[string][]byte, error) {
	creds := memoOf(&r.creds)
	now := r.Clock.Now()
	if got, ok := creds.get(key); ok && now.Sub(got.read) < forgeCredentialTTL {
		return got.data, nil
	}
	var secret corev1.Secret
	if err := r.Get(ctx, key, &secret); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, fmt.Errorf("%w: %s/%s", gitsource.ErrMissingSecret, key.Namespace, key.Name)
		}
		return nil, err
	}
	creds.put(key, forgeCredential{data: secret.Data, read: now})
	return secret.Data, nil
}

// forgetForgeSecret drops the Secret's data, so the next try reads it
// again: a post failed, perhaps because the Secret changed.
func (r *ForgeReconciler) forgetForgeSecret(key types.NamespacedName) {
	memoOf(&r.creds).forget(key)
}
