package sealing

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/taugrid/taugrid/evidence"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=secrets,verbs=create

// EvidenceKeyField is the key of the signing key in its Secret.
const EvidenceKeyField = "key"

// EvidenceLinkKey returns the key that signs evidence links, from Secret
// namespace/name; when there is none it creates one with a random key, so
// every replica and every restart signs alike. When two replicas race,
// the one that loses reads the winner's.
func EvidenceLinkKey(ctx context.Context, c client.Client, namespace, name string) ([]byte, error) {
	s, err := generatedSecret(ctx, c, namespace, name, "the evidence link key", func() (map[string][]byte, error) {
		key := make([]byte, evidence.MinKeyBytes)
		_, _ = rand.Read(key)
		return map[string][]byte{EvidenceKeyField: key}, nil
	})
	if err != nil {
		return nil, err
	}
	if k := s.Data[EvidenceKeyField]; len(k) >= evidence.MinKeyBytes {
		return k, nil
	}
	return nil, fmt.Errorf("secret %s/%s: %q must hold at least %d bytes", namespace, name, EvidenceKeyField, evidence.MinKeyBytes)
}

// generatedSecret reads Secret namespace/name, or creates it with the data
// generate makes, so that every replica and every restart reads the same;
// when two replicas race, the one that loses reads the winner's. what names
// the Secret in errors, which never quote its data.
func generatedSecret(ctx context.Context, c client.Client, namespace, name, what string, generate func() (map[string][]byte, error)) (*corev1.Secret, error) {
	for range 2 {
		s := &corev1.Secret{}
		err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s)
		if err == nil {
			return s, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading %s %s/%s: %w", what, namespace, name, err)
		}
		data, err := generate()
		if err != nil {
			return nil, err
		}
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Type: corev1.SecretTypeOpaque, Data: data}
		if err = c.Create(ctx, s); err == nil {
			return s, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s %s/%s: %w", what, namespace, name, err)
		}
	}
	return nil, fmt.Errorf("secret %s/%s: created and gone again", namespace, name)
}
