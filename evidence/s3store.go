package evidence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Options configure an S3-compatible store.
type S3Options struct {
	Endpoint string // host:port, without scheme
	Bucket   string
	// Prefix is prepended to every object name, e.g. "taugrid/".
	Prefix    string
	Region    string
	Insecure  bool // plain HTTP
	AccessKey string
	SecretKey string
	// Timeout bounds each request; 0 means 10s.
	Timeout time.Duration
}

// S3Store keeps evidence in an S3-compatible bucket.
type S3Store struct {
	client  *minio.Client
	bucket  string
	prefix  string
	timeout time.Duration
}

// NewS3Store connects lazily: nothing is sent until the first call.
func NewS3Store(o S3Options) (*S3Store, error) {
	if o.Endpoint == "" || o.Bucket == "" {
		return nil, errors.New("evidence S3 store needs an endpoint and a bucket")
	}
	transport, err := minio.DefaultTransport(!o.Insecure)
	if err != nil {
		return nil, err
	}
	transport.ResponseHeaderTimeout = 30 * time.Second
	c, err := minio.New(o.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(o.AccessKey, o.SecretKey, ""),
		Secure:    !o.Insecure,
		Region:    o.Region,
		Transport: transport,
		// The caller's retry (the next reconcile) is the retry: a full or
		// unreachable store must not hold a worker for long.
		MaxRetries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("evidence S3 store: %w", err)
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	return &S3Store{client: c, bucket: o.Bucket, prefix: o.Prefix, timeout: timeout}, nil
}

// PutBlob uploads content by digest unless it is there already.
func (s *S3Store) PutBlob(ctx context.Context, digest string, data []byte) error {
	p, err := blobPath(digest)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.client.StatObject(ctx, s.bucket, s.prefix+p, minio.StatObjectOptions{}); err == nil {
		return nil
	} else if !isNotFound(err) {
		return s.wrap(err)
	}
	return s.put(ctx, p, data, "application/octet-stream")
}

// Blob downloads content by digest.
func (s *S3Store) Blob(ctx context.Context, digest string) ([]byte, error) {
	p, err := blobPath(digest)
	if err != nil {
		return nil, err
	}
	return s.get(ctx, p)
}

// PutManifest seals a bundle; never overwrites a different one.
func (s *S3Store) PutManifest(ctx context.Context, key Key, raw []byte) error {
	existing, err := s.get(ctx, key.Path())
	switch {
	case err == nil:
		return sameManifest(existing, raw, key)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.put(ctx, key.Path(), raw, MediaJSON)
}

// Manifest reads a sealed bundle's manifest.
func (s *S3Store) Manifest(ctx context.Context, key Key) ([]byte, error) {
	return s.get(ctx, key.Path())
}

// PutAttestation uploads a bundle's attestation.
func (s *S3Store) PutAttestation(ctx context.Context, key Key, envelope []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.put(ctx, key.AttestationPath(), envelope, MediaJSON)
}

// Attestation downloads a bundle's attestation.
func (s *S3Store) Attestation(ctx context.Context, key Key) ([]byte, error) {
	return s.get(ctx, key.AttestationPath())
}

// Manifests lists sealed bundles of one run, or all.
func (s *S3Store) Manifests(ctx context.Context, namespace, run string) ([]Entry, error) {
	prefix := "bundles/"
	if namespace != "" && run != "" {
		prefix += namespace + "/" + run + "/"
	}
	return s.list(ctx, prefix, func(p string) bool { _, ok := parseKeyPath(p); return ok })
}

// Blobs lists every blob.
func (s *S3Store) Blobs(ctx context.Context) ([]Entry, error) {
	return s.list(ctx, "blobs/sha256/", func(p string) bool { return hexDigest.MatchString(strings.TrimPrefix(p, "blobs/sha256/")) })
}

// Delete removes one object.
func (s *S3Store) Delete(ctx context.Context, p string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.wrap(s.client.RemoveObject(ctx, s.bucket, s.prefix+p, minio.RemoveObjectOptions{}))
}

func (s *S3Store) put(ctx context.Context, p string, data []byte, contentType string) error {
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+p, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType, DisableMultipart: true})
	return s.wrap(err)
}

func (s *S3Store) get(ctx context.Context, p string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	obj, err := s.client.GetObject(ctx, s.bucket, s.prefix+p, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap(err)
	}
	defer func() { _ = obj.Close() }()
	data, err := io.ReadAll(obj)
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	return data, s.wrap(err)
}

func (s *S3Store) list(ctx context.Context, prefix string, keep func(string) bool) ([]Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	var out []Entry
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s.wrap(o.Err)
		}
		p := strings.TrimPrefix(o.Key, s.prefix)
		if keep(p) {
			out = append(out, Entry{Path: p, Modified: o.LastModified})
		}
	}
	return out, nil
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusNotFound || r.Code == minio.NoSuchKey
}

// wrap names the bucket in an error; never the credentials.
func (s *S3Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("evidence bucket %s: %w", s.bucket, err)
}
