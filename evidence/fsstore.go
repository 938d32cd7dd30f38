package evidence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileStore keeps evidence in a directory, typically a PersistentVolume.
type FileStore struct {
	Root string
}

// NewFileStore uses (and creates) root.
func NewFileStore(root string) (*FileStore, error) {
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("evidence directory: %w", err)
	}
	return &FileStore{Root: root}, nil
}

// PutBlob writes content by digest, atomically.
func (s *FileStore) PutBlob(_ context.Context, digest string, data []byte) error {
	p, err := blobPath(digest)
	if err != nil {
		return err
	}
	if _, err := os.Stat(s.abs(p)); err == nil {
		return nil
	}
	return s.writeAtomic(p, data)
}

// Blob reads content by digest.
func (s *FileStore) Blob(_ context.Context, digest string) ([]byte, error) {
	p, err := blobPath(digest)
	if err != nil {
		return nil, err
	}
	return s.read(p)
}

// PutManifest seals a bundle; never overwrites a different one.
func (s *FileStore) PutManifest(_ context.Context, key Key, raw []byte) error {
	existing, err := s.read(key.Path())
	switch {
	case err == nil:
		return sameManifest(existing, raw, key)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	return s.writeAtomic(key.Path(), raw)
}

// Manifest reads a sealed bundle's manifest.
func (s *FileStore) Manifest(_ context.Context, key Key) ([]byte, error) {
	return s.read(key.Path())
}

// PutAttestation writes a bundle's attestation, atomically.
func (s *FileStore) PutAttestation(_ context.Context, key Key, envelope []byte) error {
	return s.writeAtomic(key.AttestationPath(), envelope)
}

// Attestation reads a bundle's attestation.
func (s *FileStore) Attestation(_ context.Context, key Key) ([]byte, error) {
	return s.read(key.AttestationPath())
}

// Manifests lists sealed bundles of one run, or all.
func (s *FileStore) Manifests(_ context.Context, namespace, run string) ([]Entry, error) {
	dir := "bundles"
	if namespace != "" && run != "" {
		dir = filepath.Join(dir, namespace, run)
	}
	return s.walk(dir, func(p string) bool { _, ok := parseKeyPath(p); return ok })
}

// Blobs lists every blob.
func (s *FileStore) Blobs(context.Context) ([]Entry, error) {
	return s.walk("blobs/sha256", func(p string) bool { return hexDigest.MatchString(filepath.Base(p)) })
}

// Delete removes one stored object.
func (s *FileStore) Delete(_ context.Context, p string) error {
	if strings.Contains(p, "..") {
		return fmt.Errorf("bad evidence path %q", p)
	}
	if err := os.Remove(s.abs(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *FileStore) abs(p string) string { return filepath.Join(s.Root, filepath.FromSlash(p)) }

func (s *FileStore) read(p string) ([]byte, error) {
	data, err := os.ReadFile(s.abs(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	return data, err
}

// writeAtomic writes to a temporary file and renames it into place, so a
// reader never sees half a file and a full disk leaves nothing behind.
func (s *FileStore) writeAtomic(p string, data []byte) error {
	return s.place(p, data, os.Rename)
}

// place writes data to a temporary file beside p's place and moves it
// there with move (a rename, or a link that fails when the name is taken).
func (s *FileStore) place(p string, data []byte, move func(tmp, dst string) error) error {
	dst := s.abs(p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after a rename; a link leaves the name in place
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return move(tmp.Name(), dst)
}

func (s *FileStore) walk(dir string, keep func(string) bool) ([]Entry, error) {
	var out []Entry
	err := filepath.WalkDir(s.abs(dir), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(s.Root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !keep(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, Entry{Path: rel, Modified: info.ModTime()})
		return nil
	})
	return out, err
}
