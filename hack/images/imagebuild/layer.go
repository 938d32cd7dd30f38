package imagebuild

import (
	"bytes"
	"compress/gzip"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// memLayer is a gzipped tar held in memory, compressed once: the library's
// tarball layers compress again for each of digest, size and write, which
// for a 70 MB binary costs minutes under the race detector.
type memLayer struct {
	tar, gz        []byte
	digest, diffID v1.Hash
}

var _ v1.Layer = (*memLayer)(nil)

// newLayer compresses data with gzip's default level and no header time,
// so the same tar always gives the same digest.
func newLayer(data []byte) (*memLayer, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	l := &memLayer{tar: data, gz: buf.Bytes()}
	var err error
	if l.digest, _, err = v1.SHA256(bytes.NewReader(l.gz)); err != nil {
		return nil, err
	}
	l.diffID, _, err = v1.SHA256(bytes.NewReader(data))
	return l, err
}

func (l *memLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *memLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *memLayer) Size() (int64, error)     { return int64(len(l.gz)), nil }
func (l *memLayer) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}

func (l *memLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.gz)), nil
}

func (l *memLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.tar)), nil
}
