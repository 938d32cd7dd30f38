package evidence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
)

// Store errors.
var (
	// ErrNotFound: no bundle or blob by that name.
	ErrNotFound = errors.New("not found in the evidence store")
	// ErrSealed: a different bundle was already sealed under that key.
	ErrSealed = errors.New("a different bundle is already sealed under this key")
)

// Store keeps bundles and their artifacts. Blobs are content-addressed and
// immutable; a bundle's manifest is written once.
type Store interface {
	// PutBlob stores content under its hex sha256; storing it again is a
	// no-op.
	PutBlob(ctx context.Context, digest string, data []byte) error
	// Blob reads content by hex sha256.
	Blob(ctx context.Context, digest string) ([]byte, error)
	// PutManifest seals a bundle. The same bytes again are a no-op;
	// different bytes are ErrSealed.
	PutManifest(ctx context.Context, key Key, raw []byte) error
	// Manifest reads a sealed bundle's manifest.
	Manifest(ctx context.Context, key Key) ([]byte, error)
	// PutAttestation stores a bundle's attestation before its manifest
	// seals it; a retry before the seal replaces it.
	PutAttestation(ctx context.Context, key Key, envelope []byte) error
	// Attestation reads a bundle's attestation.
	Attestation(ctx context.Context, key Key) ([]byte, error)
	// Manifests lists sealed bundles, of one run when namespace and run are
	// given, else all.
	Manifests(ctx context.Context, namespace, run string) ([]Entry, error)
	// Blobs lists every blob.
	Blobs(ctx context.Context) ([]Entry, error)
	// Delete removes a manifest (by its path) or a blob (blobs/sha256/<hex>);
	// only retention deletes.
	Delete(ctx context.Context, path string) error
}

// Entry is one stored object.
type Entry struct {
	Path     string
	Modified time.Time
}

// Write stores a sealed bundle: blobs and the attestation first, the
// manifest last, so a manifest never names a missing blob and a sealed
// bundle has its attestation.
func Write(ctx context.Context, s Store, b *Sealed) error {
	for _, name := range slices.Sorted(maps.Keys(b.Blobs)) {
		if err := s.PutBlob(ctx, name, b.Blobs[name]); err != nil {
			return fmt.Errorf("storing evidence of %s: %w", b.Manifest.Key, err)
		}
	}
	if b.Attestation != nil {
		if err := s.PutAttestation(ctx, b.Manifest.Key, b.Attestation); err != nil {
			return fmt.Errorf("storing the attestation of %s: %w", b.Manifest.Key, err)
		}
	}
	if err := s.PutManifest(ctx, b.Manifest.Key, b.Raw); err != nil {
		return fmt.Errorf("sealing evidence of %s: %w", b.Manifest.Key, err)
	}
	return nil
}

// Has says whether a bundle is sealed under key.
func Has(ctx context.Context, s Store, key Key) (bool, error) {
	_, err := s.Manifest(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// Load reads and parses a sealed bundle's manifest.
func Load(ctx context.Context, s Store, key Key) (*Manifest, []byte, error) {
	raw, err := s.Manifest(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	m, err := ParseManifest(raw)
	return m, raw, err
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

func blobPath(digest string) (string, error) {
	if !hexDigest.MatchString(digest) {
		return "", fmt.Errorf("%q is not a sha256 hex digest", digest)
	}
	return "blobs/sha256/" + digest, nil
}

// sameManifest decides a second PutManifest: equal bytes are fine.
func sameManifest(existing, raw []byte, key Key) error {
	if bytes.Equal(existing, raw) {
		return nil
	}
	return fmt.Errorf("%s: %w", key, ErrSealed)
}
