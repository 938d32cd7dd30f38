package evidence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
)

// CreateAuditEntry writes entry seq, create-only: the entry is written
// to a temporary file and linked into place, which fails when the name
// is taken, so two writers cannot both write seq and no reader sees half
// an entry.
func (s *FileStore) CreateAuditEntry(_ context.Context, namespace string, seq int64, raw []byte) error {
	p, err := auditPath(namespace, seq)
	if err != nil {
		return err
	}
	if err := s.place(p, raw, os.Link); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", p, ErrExists)
	} else if err != nil {
		return err
	}
	return nil
}

// AuditEntry reads entry seq of namespace's log.
func (s *FileStore) AuditEntry(_ context.Context, namespace string, seq int64) ([]byte, error) {
	p, err := auditPath(namespace, seq)
	if err != nil {
		return nil, err
	}
	return s.read(p)
}

// AuditSeqs lists namespace's stored entries after seq after.
func (s *FileStore) AuditSeqs(_ context.Context, namespace string, after int64, limit int) ([]int64, error) {
	dir, err := auditDir(namespace)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(s.abs(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var seqs []int64
	for _, de := range des {
		if seq, ok := auditSeqOf(de.Name()); ok && seq > after && !de.IsDir() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	if limit > 0 && len(seqs) > limit {
		seqs = seqs[:limit]
	}
	return seqs, nil
}

// CreateAuditEntry writes entry seq with If-None-Match: *, so the bucket
// refuses a second writer of seq (412) where it supports conditional
// writes, as AWS S3, MinIO and most others do.
func (s *S3Store) CreateAuditEntry(ctx context.Context, namespace string, seq int64, raw []byte) error {
	p, err := auditPath(namespace, seq)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	opts := minio.PutObjectOptions{ContentType: MediaJSON, DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	_, err = s.client.PutObject(ctx, s.bucket, s.prefix+p, bytes.NewReader(raw), int64(len(raw)), opts)
	if r := minio.ToErrorResponse(err); r.Code == "PreconditionFailed" || r.StatusCode == 412 {
		return fmt.Errorf("%s: %w", p, ErrExists)
	}
	return s.wrap(err)
}

// AuditEntry reads entry seq of namespace's log.
func (s *S3Store) AuditEntry(ctx context.Context, namespace string, seq int64) ([]byte, error) {
	p, err := auditPath(namespace, seq)
	if err != nil {
		return nil, err
	}
	return s.get(ctx, p)
}

// AuditSeqs lists namespace's stored entries after seq after: the names
// are zero-padded, so the bucket's order is theirs and the listing starts
// right after it.
func (s *S3Store) AuditSeqs(ctx context.Context, namespace string, after int64, limit int) ([]int64, error) {
	dir, err := auditDir(namespace)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	o := minio.ListObjectsOptions{Prefix: s.prefix + dir}
	if after > 0 {
		o.StartAfter = fmt.Sprintf("%s%s%012d.json", s.prefix, dir, after)
	}
	var seqs []int64
	for obj := range s.client.ListObjects(ctx, s.bucket, o) {
		if obj.Err != nil {
			return nil, s.wrap(obj.Err)
		}
		if seq, ok := auditSeqOf(strings.TrimPrefix(obj.Key, s.prefix+dir)); ok && seq > after {
			seqs = append(seqs, seq)
		}
		if limit > 0 && len(seqs) == limit {
			break // the deferred cancel ends the listing
		}
	}
	return seqs, nil
}
