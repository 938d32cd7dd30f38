package sealing

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/taugrid/taugrid/evidence"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=secrets,verbs=get;create

// Fields of the attestation key's Secret.
const (
	// AttestationPrivateField holds the ECDSA P-256 private key, PKCS#8 PEM.
	AttestationPrivateField = "cosign.key"
	// AttestationPublicField holds its public key, PKIX PEM: what auditors
	// pass to cosign --key.
	AttestationPublicField = "cosign.pub"
)

// AttestationKeys reads the key that signs every sealed bundle's
// attestation from a Secret in the controller's namespace, creating one
// with a fresh key when there is none. It is read at every seal, so a key
// the platform team replaces signs from the next seal on, and a key that
// cannot be parsed stops sealing rather than let a bundle go unsigned.
type AttestationKeys struct {
	// Client reads the Secret and creates it: an uncached client, so that
	// no informer lists every Secret of the cluster.
	Client          client.Client
	Namespace, Name string

	mu     sync.Mutex
	parsed *evidence.AttestationKey
	from   []byte // the private key parsed
}

// Key returns the signing key. Its errors name the Secret, never the key.
func (a *AttestationKeys) Key(ctx context.Context) (*evidence.AttestationKey, error) {
	s, err := a.secret(ctx)
	if err != nil {
		return nil, err
	}
	priv := s.Data[AttestationPrivateField]
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.parsed != nil && bytes.Equal(a.from, priv) {
		return a.parsed, nil
	}
	k, err := evidence.ParseAttestationKey(priv)
	if err != nil {
		return nil, fmt.Errorf("%s/%s (%q): %w; sealing waits for one that parses (delete the Secret and the controller makes a new one)",
			a.Namespace, a.Name, AttestationPrivateField, err)
	}
	a.parsed, a.from = k, bytes.Clone(priv)
	return k, nil
}

// PublicKey is the public key auditors verify with, as PKIX PEM, and its
// fingerprint.
func (a *AttestationKeys) PublicKey(ctx context.Context) ([]byte, string, error) {
	k, err := a.Key(ctx)
	if err != nil {
		return nil, "", err
	}
	return k.PublicPEM, k.Fingerprint, nil
}

// secret reads the Secret, or creates it with a fresh key.
func (a *AttestationKeys) secret(ctx context.Context) (*corev1.Secret, error) {
	return generatedSecret(ctx, a.Client, a.Namespace, a.Name, "the attestation key", func() (map[string][]byte, error) {
		priv, pub, err := evidence.NewAttestationKeyPEM()
		return map[string][]byte{AttestationPrivateField: priv, AttestationPublicField: pub}, err
	})
}
