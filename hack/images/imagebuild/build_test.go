package imagebuild

import (
	"archive/tar"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// build builds every image for this machine's platform from the work tree
// into a new directory, signed with key.
func build(t *testing.T, key *ecdsa.PrivateKey, out string) (Options, []*Built) {
	t.Helper()
	if testing.Short() {
		t.Skip("compiles the three binaries; run without -short")
	}
	src, err := ReadSource(context.Background(), filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Source: src, Registry: "ghcr.io/taugrid", Tag: "v0.0.0-test", Images: Specs,
		Platforms: []Platform{{"linux", runtime.GOARCH}}, Out: out, Work: WorkDir(out)}
	built, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(context.Background(), o, built, key); err != nil {
		t.Fatal(err)
	}
	return o, built
}

// scratch outlives each test: the first build is shared.
var scratch string

func TestMain(m *testing.M) {
	scratch = must(os.MkdirTemp("", "imagebuild-test-"))
	code := m.Run()
	_ = os.RemoveAll(scratch)
	os.Exit(code)
}

var (
	testKey     = must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	firstOnce   sync.Once
	firstOpts   Options
	firstBuilds []*Built
)

// first is one build shared by the tests that only read it.
func first(t *testing.T) (Options, []*Built) {
	if testing.Short() {
		// build skips; skipping inside the Once would leave every later
		// test a "failed" first build.
		t.Skip("compiles the three binaries; run without -short")
	}
	firstOnce.Do(func() { firstOpts, firstBuilds = build(t, testKey, filepath.Join(scratch, "first")) })
	if firstBuilds == nil {
		t.Fatal("the first build failed")
	}
	return firstOpts, firstBuilds
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestTwoBuildsOfOneCommitGiveTheSameDigests: binaries compiled again into
// another directory, layers and configs assembled again, give the same
// index and image digests.
func TestTwoBuildsOfOneCommitGiveTheSameDigests(t *testing.T) {
	_, a := first(t)
	_, b := build(t, testKey, t.TempDir())
	for i := range a {
		if a[i].Digest != b[i].Digest {
			t.Errorf("%s: index %s, then %s", a[i].Ref, a[i].Digest, b[i].Digest)
		}
		for j := range a[i].Platforms {
			if pa, pb := a[i].Platforms[j], b[i].Platforms[j]; pa.Digest != pb.Digest {
				t.Errorf("%s %s: %s, then %s", a[i].Ref, pa.Platform, pa.Digest, pb.Digest)
			}
		}
	}
}

// TestTheImagesRunAsNonRootWithTheCABundleAndTheMountedPaths reads each
// image's files and config as a container runtime would.
func TestTheImagesRunAsNonRootWithTheCABundleAndTheMountedPaths(t *testing.T) {
	o, built := first(t)
	for _, b := range built {
		img := platformImage(t, b)
		cf := must(img.ConfigFile())
		if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != b.Spec.Binary() {
			t.Errorf("%s: user %q, entrypoint %q", b.Ref, cf.Config.User, cf.Config.Entrypoint)
		}
		if got := cf.Config.Labels["org.opencontainers.image.revision"]; got != o.Source.Revision || !cf.Created.Equal(o.Source.Time) {
			t.Errorf("%s: revision label %q, created %v; want %s at %v", b.Ref, got, cf.Created, o.Source.Revision, o.Source.Time)
		}
		files := filesOf(t, img, o.Source.Time)
		want := map[string]func(*tar.Header) bool{
			"etc/passwd":                             func(h *tar.Header) bool { return h.Size > 0 },
			"etc/ssl/certs/ca-certificates.crt":      func(h *tar.Header) bool { return h.Size > 100_000 },
			"tmp":                                    func(h *tar.Header) bool { return h.Mode == 0o1777 },
			"home/nonroot":                           func(h *tar.Header) bool { return h.Uid == UID },
			strings.TrimPrefix(b.Spec.Binary(), "/"): func(h *tar.Header) bool { return h.Mode == 0o755 && h.Uid == 0 },
		}
		for _, d := range b.Spec.Dirs {
			want[strings.TrimPrefix(d, "/")] = func(h *tar.Header) bool { return h.Uid == UID && h.Gid == GID }
		}
		if b.Spec.CGO {
			want["usr/lib/"+gnuTriple(runtime.GOARCH)+"/libc.so.6"] = func(h *tar.Header) bool { return h.Size > 0 }
		}
		for name, ok := range want {
			if h, found := files[name]; !found || !ok(h) {
				t.Errorf("%s: %s is missing or wrong: %+v", b.Ref, name, h)
			}
		}
	}
}

func platformImage(t *testing.T, b *Built) v1.Image {
	t.Helper()
	im := must(b.Index.IndexManifest())
	return must(b.Index.Image(im.Manifests[0].Digest))
}

// filesOf lists the image's files, failing on any time but at.
func filesOf(t *testing.T, img v1.Image, at time.Time) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	r := tar.NewReader(rc)
	files := map[string]*tar.Header{}
	for {
		h, err := r.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(at) {
			t.Errorf("%s has time %v, want the commit's %v", h.Name, h.ModTime, at)
		}
		files[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// TestVerifyChecksTheSignatureAndTheProvenance: the layouts verify with the
// build's key (signature, provenance and SBOM), and not with another one.
func TestVerifyChecksTheSignatureAndTheProvenance(t *testing.T) {
	o, built := first(t)
	other := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	for _, b := range built {
		dir := LayoutDir(o.Out, b.Spec.Name)
		v, err := Verify(dir, o.Tag, &testKey.PublicKey)
		if err != nil {
			t.Fatalf("%s: %v", b.Ref, err)
		}
		if v.Ref != Repository(b.Ref) || v.Digest != b.Digest || v.Revision != o.Source.Revision || !strings.HasPrefix(v.GoVersion, "go1.") ||
			v.Modules < 10 || v.Packages < v.Modules {
			t.Errorf("%s: verified %+v", b.Ref, v)
		}
		if _, err := Verify(dir, o.Tag, &other.PublicKey); err == nil || !strings.Contains(err.Error(), "does not verify") {
			t.Errorf("%s verified with another key: %v", b.Ref, err)
		}
		if _, err := Verify(dir, "v9.9.9", &testKey.PublicKey); err == nil {
			t.Errorf("%s: an absent tag verified", b.Ref)
		}
	}
}

// TestVerifyRefusesAnUnsignedLayout: an index written without its
// signature is not taken as signed.
func TestVerifyRefusesAnUnsignedLayout(t *testing.T) {
	o, built := first(t)
	dir := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dir, os.DirFS(LayoutDir(o.Out, built[2].Spec.Name))); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "index.json")
	body := must(os.ReadFile(idx))
	tampered := strings.ReplaceAll(string(body), SignatureTag(built[2].Digest, "sig"), "removed")
	if err := os.WriteFile(idx, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, o.Tag, &testKey.PublicKey); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("a layout without its signature: %v", err)
	}
}
