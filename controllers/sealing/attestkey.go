package sealing

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/taugrid/taugrid/evidence"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=secrets,verbs=get;create;list;watch

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
// the platform team replaces signs from the next seal on (once the watch
// has brought it: Cache), and a key that cannot be parsed stops sealing
// rather than let a bundle go unsigned.
type AttestationKeys struct {
	// Client creates the Secret, and reads it when Cache is not set, its
	// watch has not synced, or it does not hold the Secret: an uncached
	// client, so that no informer lists every Secret of the cluster.
	Client client.Client
	// Cache, when set, watches the Secret alone (KeySecretCache): once
	// its watch has synced, a seal reads the Secret there, sending the API
	// server nothing. Without it (and until then, or while RBAC refuses
	// the watch) each seal reads the Secret, one request a run (hack/scale,
	// 10,000 runs).
	Cache           cache.Cache
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

// secret reads the Secret, from Cache when it holds it, or creates it
// with a fresh key.
func (a *AttestationKeys) secret(ctx context.Context) (*corev1.Secret, error) {
	if a.watched(ctx) {
		s := &corev1.Secret{}
		switch err := a.Cache.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, s); {
		case err == nil:
			return s, nil
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading the attestation key %s/%s: %w", a.Namespace, a.Name, err)
		}
		// None yet, or deleted: made (or read, should another replica have
		// made it) around the cache.
	}
	return generatedSecret(ctx, a.Client, a.Namespace, a.Name, "the attestation key", func() (map[string][]byte, error) {
		priv, pub, err := evidence.NewAttestationKeyPEM()
		return map[string][]byte{AttestationPrivateField: priv, AttestationPublicField: pub}, err
	})
}

// watched reports whether Cache's watch of the Secret has synced, without
// waiting for it: before the manager starts, and while the API server
// refuses the watch, the Secret is read around it.
func (a *AttestationKeys) watched(ctx context.Context) bool {
	if a.Cache == nil {
		return false
	}
	inf, err := a.Cache.GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false))
	return err == nil && inf.HasSynced()
}

// KeySecretCache is a cache of one Secret, namespace/name, for
// AttestationKeys.Cache: it lists and watches that Secret alone (a field
// selector on its name), so the controller holds no other Secret. It is a
// runnable: add it to the manager, which starts it.
func KeySecretCache(cfg *rest.Config, scheme *runtime.Scheme, namespace, name string) (cache.Cache, error) {
	return cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", name),
		},
	}})
}
