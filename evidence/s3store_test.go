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

// TestBothStoresKeepTheAttestationNextToItsBundleAndPruneItWithIt: in a
// directory and in S3, a sealed bundle's attestation is stored beside its
// manifest, verifies through the store, is no bundle itself, and goes
// when retention prunes the bundle.
func TestBothStoresKeepTheAttestationNextToItsBundleAndPruneItWithIt(t *testing.T) {
	_, o := s3Server(t)
	s3, err := NewS3Store(o)
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := NewFileStore(t.TempDir())
	signer, pub := testAttestationKey(t)
	for name, st := range map[string]Store{"S3": s3, "directory": fs} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var keys []Key
			for n := 1; n <= 2; n++ {
				key := Key{Namespace: "team-a", Run: "research-1a2b", Attempt: n}
				sealed, err := exampleBundle(t, key, "x\n").Seal(sealTime)
				if err != nil {
					t.Fatal(err)
				}
				if sealed.Attestation, err = Attest(ctx, sealed, signer); err != nil {
					t.Fatal(err)
				}
				if err := Write(ctx, st, sealed); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
			raw, _ := st.Manifest(ctx, keys[1])
			env, err := st.Attestation(ctx, keys[1])
			if err != nil {
				t.Fatalf("no attestation beside %s: %v", keys[1].Path(), err)
			}
			if r := VerifyAttested(ctx, raw, st, env, pub); !r.OK() {
				t.Errorf("verify through the store: %v", r.Problems)
			}
			if entries, _ := st.Manifests(ctx, "", ""); len(entries) != 2 {
				t.Errorf("bundles %+v, want the two manifests and no attestation", entries)
			}
			if n, _, err := Prune(ctx, st, Retention{KeepLast: 1}, time.Now()); err != nil || n != 1 {
				t.Fatalf("prune last=1 = %d, %v", n, err)
			}
			kept := 0
			for _, k := range keys {
				_, mErr := st.Manifest(ctx, k)
				_, aErr := st.Attestation(ctx, k)
				if (mErr == nil) != (aErr == nil) {
					t.Errorf("%s: manifest %v, attestation %v: want both or neither", k, mErr, aErr)
				}
				if mErr == nil {
					kept++
				}
			}
			if kept != 1 {
				t.Errorf("%d bundles kept, want 1", kept)
			}
		})
	}
}
