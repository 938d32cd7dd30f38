package sharedtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/taugrid/taugrid/gitsource"
)

// WriteArchive writes files (path to content) as the .tar.gz archive of
// commit that gitsource serves, in dir, named by its digest: what a fake
// git client's Archive returns.
func WriteArchive(dir, commit string, files map[string]string) (*gitsource.Archive, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	digest := hex.EncodeToString(sum[:])
	p := filepath.Join(dir, digest)
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		return nil, err
	}
	return &gitsource.Archive{Commit: commit, Digest: digest, Size: int64(buf.Len()), Path: p}, nil
}
