package main

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
)

// signingKey is the key in file, or else the development key at dev,
// made there the first time.
func signingKey(file, dev string, stderr io.Writer) (*ecdsa.PrivateKey, error) {
	if file != "" {
		return imagebuild.LoadKey(file)
	}
	fmt.Fprintf(stderr, "release: no release key (-key, $TAU_RELEASE_SIGNING_KEY or $TAU_IMAGE_SIGNING_KEY): signing SHA256SUMS with the development key %s; its cosign.pub is not the release's\n", dev)
	return imagebuild.DevelopmentKey(dev)
}

// sign writes SHA256SUMS.sig and cosign.pub into out: the signature is
// what cosign sign-blob --key writes (base64 of an ASN.1 ECDSA signature
// of the file's SHA-256), so cosign verify-blob --key cosign.pub
// --signature SHA256SUMS.sig checks it.
func sign(out string, key *ecdsa.PrivateKey) error {
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		return err
	}
	digest := sha256.Sum256(sums)
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		return fmt.Errorf("signing SHA256SUMS: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS.sig"), []byte(base64.StdEncoding.EncodeToString(sig)), 0o644); err != nil {
		return err
	}
	return imagebuild.WritePublicKey(filepath.Join(out, "cosign.pub"), &key.PublicKey)
}
