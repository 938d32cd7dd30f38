package evidence

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
)

// AttestationKey signs the attestation of every sealed bundle: an ECDSA
// P-256 key, the kind cosign generates and verifies with --key.
type AttestationKey struct {
	signer dsse.SignerVerifier
	// PublicPEM is the public key as PKIX PEM: the cosign.pub auditors
	// verify with.
	PublicPEM []byte
	// Fingerprint names the key: sha256 of its PKIX DER form.
	Fingerprint string
}

// Key returns k itself: a key parsed once is its own KeySource.
func (k *AttestationKey) Key(context.Context) (*AttestationKey, error) { return k, nil }

// PublicKey returns k's public key and fingerprint: a key parsed once is
// its own PublicKeySource.
func (k *AttestationKey) PublicKey(context.Context) ([]byte, string, error) {
	return k.PublicPEM, k.Fingerprint, nil
}

// NewAttestationKeyPEM makes a fresh key pair: the private key as PKCS#8
// PEM and the public key as PKIX PEM.
func NewAttestationKeyPEM() (private, public []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
}

// ParseAttestationKey reads a PKCS#8 PEM ECDSA P-256 private key. Its
// errors never quote the key.
func ParseAttestationKey(privatePEM []byte) (*AttestationKey, error) {
	block, _ := pem.Decode(privatePEM)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("the attestation key is not a PEM \"PRIVATE KEY\" block (PKCS#8)")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("the attestation key is not a PKCS#8 private key")
	}
	k, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("the attestation key is not an ECDSA P-256 key")
	}
	sk, err := signerverifier.LoadKey(privatePEM)
	if err != nil {
		return nil, errors.New("the attestation key cannot be loaded")
	}
	fp, err := fingerprintOf(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	sk.KeyID = fp
	sv, err := signerverifier.NewECDSASignerVerifierFromSSLibKey(sk)
	if err != nil {
		return nil, errors.New("the attestation key cannot sign")
	}
	return &AttestationKey{signer: sv, PublicPEM: []byte(sk.KeyVal.Public + "\n"), Fingerprint: fp}, nil
}

// PublicKey is a key that verifies attestations.
type PublicKey struct {
	verifier    dsse.Verifier
	Fingerprint string
}

// ParsePublicKey reads a PKIX PEM ECDSA P-256 public key (cosign.pub).
func ParsePublicKey(publicPEM []byte) (*PublicKey, error) {
	block, _ := pem.Decode(publicPEM)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM \"PUBLIC KEY\" block")
	}
	parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not a public key: %w", err)
	}
	k, ok := parsed.(*ecdsa.PublicKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("not an ECDSA P-256 public key")
	}
	fp, err := fingerprintOf(k)
	if err != nil {
		return nil, err
	}
	sk, err := signerverifier.LoadKey(publicPEM)
	if err != nil {
		return nil, err
	}
	sk.KeyID = fp // the envelope's keyid, as Attest writes it
	v, err := signerverifier.NewECDSASignerVerifierFromSSLibKey(sk)
	if err != nil {
		return nil, err
	}
	return &PublicKey{verifier: v, Fingerprint: fp}, nil
}

// fingerprintOf is "sha256:" and the hex sha256 of the key's PKIX DER,
// what `openssl pkey -pubin -outform DER | sha256sum` prints.
func fingerprintOf(k *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
