package gitsource

import (
	"context"
	"errors"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of a git credentials Secret.
const (
	SecretUsername   = "username"
	SecretPassword   = "password"
	SecretToken      = "token"
	SecretIdentity   = "identity"
	SecretPassphrase = "passphrase"
	SecretKnownHosts = "known_hosts"
	SecretCABundle   = "ca.crt"
)

// ErrMissingSecret is a terminal error: a human must create the Secret.
var ErrMissingSecret = errors.New("credentials Secret not found")

// RemoteFor builds a Remote from a git source and, when it names
// one, its credentials Secret in namespace.
func RemoteFor(ctx context.Context, c client.Reader, namespace string, src taugridv1.GitSource) (Remote, error) {
	r := Remote{URL: src.URL}
	if src.SecretRef == nil {
		return r, nil
	}
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: src.SecretRef.Name}, &s); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return r, fmt.Errorf("%w: %s/%s", ErrMissingSecret, namespace, src.SecretRef.Name)
		}
		return r, err
	}
	d := s.Data
	r.Auth = Credentials{
		Username: string(d[SecretUsername]), Password: string(d[SecretPassword]), Token: string(d[SecretToken]),
		SSHPrivateKey: d[SecretIdentity], SSHPassphrase: string(d[SecretPassphrase]),
		KnownHosts: d[SecretKnownHosts], CABundle: d[SecretCABundle],
	}
	return r, nil
}
