package evidence

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// s3Server starts a real S3-speaking server in-process, with one bucket.
func s3Server(t *testing.T) (*httptest.Server, S3Options) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("evidence"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return srv, S3Options{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "evidence", Prefix: "taugrid/",
		Region: "us-east-1", Insecure: true, AccessKey: "AKIAEXAMPLEEXAMPLE00", SecretKey: "s3cr3t-s3cr3t-s3cr3t", Timeout: 5 * time.Second}
}

func TestTheS3StoreKeepsBundlesImmutableAndVerifiable(t *testing.T) {
	_, o := s3Server(t)
	st, err := NewS3Store(o)
	if err != nil {
		t.Fatal(err)
	}
	testSealedIsImmutable(t, st)
	ctx := context.Background()
	key := Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1}
	raw, err := st.Manifest(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if r := Verify(ctx, raw, st); !r.OK() || !r.Reproduced {
		t.Errorf("verify through S3 = %+v", r)
	}
	entries, err := st.Manifests(ctx, "team-a", "research-1a2b")
	if err != nil || len(entries) != 1 || entries[0].Path != key.Path() {
		t.Errorf("Manifests = %+v, %v; want the one bundle", entries, err)
	}
	blobs, err := st.Blobs(ctx)
	if err != nil || len(blobs) < 8 {
		t.Errorf("Blobs = %d, %v; want every artifact", len(blobs), err)
	}
	if _, err := st.Blob(ctx, strings.Repeat("0", 64)); !isErrNotFound(err) {
		t.Errorf("a missing blob: %v, want ErrNotFound", err)
	}
	if n, _, err := Prune(ctx, st, Retention{KeepLast: 1}, time.Now()); err != nil || n != 0 {
		t.Errorf("prune last=1 of one bundle = %d, %v", n, err)
	}
}

func TestAnUnreachableS3StoreFailsFastWithoutItsCredentials(t *testing.T) {
	srv, o := s3Server(t)
	srv.Close()
	st, err := NewS3Store(o)
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := exampleBundle(t, Key{Namespace: "team-a", Run: "r", Attempt: 1}, "x\n").Seal(sealTime)
	start := time.Now()
	err = Write(context.Background(), st, sealed)
	if err == nil {
		t.Fatal("writing to a closed server succeeded")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("failing took %s", d)
	}
	if strings.Contains(err.Error(), o.SecretKey) || strings.Contains(err.Error(), o.AccessKey) {
		t.Errorf("the error names the credentials: %v", err)
	}
}
