package policy

import (
	"context"
	"fmt"

	"github.com/taugrid/taugrid/gitsource"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RemoteFor builds the git remote of a TauRepository or TauPlatform from its
// git source and, when it names
// one, its credentials Secret in namespace.
func RemoteFor(ctx context.Context, c client.Reader, namespace string, src taugridv1.GitSource) (gitsource.Remote, error) {
	r := gitsource.Remote{URL: src.URL}
	if src.SecretRef == nil {
		return r, nil
	}
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: src.SecretRef.Name}, &s); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return r, fmt.Errorf("%w: %s/%s", gitsource.ErrMissingSecret, namespace, src.SecretRef.Name)
		}
		return r, err
	}
	d := s.Data
	r.Auth = gitsource.Credentials{
		Username: string(d[gitsource.SecretUsername]), Password: string(d[gitsource.SecretPassword]), Token: string(d[gitsource.SecretToken]),
		SSHPrivateKey: d[gitsource.SecretIdentity], SSHPassphrase: string(d[gitsource.SecretPassphrase]),
		KnownHosts: d[gitsource.SecretKnownHosts], CABundle: d[gitsource.SecretCABundle],
	}
	return r, nil
}
