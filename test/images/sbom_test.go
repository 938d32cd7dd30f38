package images

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	spdxjson "github.com/spdx/tools-golang/json"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
	"github.com/taugrid/taugrid/hack/sbom"
)

// checkSBOM checks the SBOM statement cosign verified for image img: about
// the index digest, an SPDX document describing img at tag by that digest,
// listing the Go modules linked in and the CA bundle's Debian package.
func checkSBOM(t *testing.T, img, tag, digest string, statement []byte) {
	t.Helper()
	var st imagebuild.SBOMStatement
	if err := json.Unmarshal(statement, &st); err != nil {
		t.Fatal(err)
	}
	hex := strings.TrimPrefix(digest, "sha256:")
	if st.PredicateType != imagebuild.SPDXDocument || len(st.Subject) == 0 || st.Subject[0].Digest["sha256"] != hex {
		t.Errorf("%s's SBOM statement: predicate %q, subjects %+v; want SPDX about %s", img, st.PredicateType, st.Subject, digest)
	}
	doc, err := spdxjson.Read(bytes.NewReader(st.Predicate))
	if err != nil {
		t.Fatalf("%s's SBOM is no SPDX JSON: %v", img, err)
	}
	p, err := sbom.Described(doc)
	if err != nil {
		t.Fatalf("%s's SBOM: %v", img, err)
	}
	if p.PackageName != img || p.PackageVersion != tag || len(p.PackageChecksums) != 1 || p.PackageChecksums[0].Value != hex {
		t.Errorf("%s's SBOM describes %s %s %v, want %s %s %s", img, p.PackageName, p.PackageVersion, p.PackageChecksums, img, tag, digest)
	}
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.PackageName] = true
	}
	for _, want := range []string{"github.com/taugrid/taugrid", "stdlib", "ca-certificates"} {
		if !names[want] {
			t.Errorf("%s's SBOM lists no %s", img, want)
		}
	}
	t.Logf("%s's SBOM: %d packages, %d bytes of SPDX JSON", img, len(doc.Packages), len(st.Predicate))
}

// replaceSBOM pushes, under the attestation tag of repo@digest, the
// attestations pushed there with the SBOM's envelope replaced by what
// reseal makes of it and its statement, as someone with push rights could;
// the returned function pushes the original back.
func replaceSBOM(t *testing.T, repo, digest string, reseal func(env imagebuild.Envelope, statement []byte) []byte) (restore func()) {
	t.Helper()
	d, err := v1.NewHash(digest)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(repo+":"+imagebuild.SignatureTag(d, "att"), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	m, err := orig.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	replaced := false
	for _, desc := range m.Layers {
		body := layerBody(t, orig, desc.Digest)
		if desc.Annotations[imagebuild.PredicateAnnotation] == imagebuild.SPDXDocument {
			var env imagebuild.Envelope
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			body, replaced = reseal(env, statementOf(t, string(body))), true
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(body, desc.MediaType), Annotations: desc.Annotations}); err != nil {
			t.Fatal(err)
		}
	}
	if !replaced {
		t.Fatalf("%s holds no SBOM attestation", tag)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := remote.Write(tag, orig); err != nil {
			t.Fatal(err)
		}
	}
}

func layerBody(t *testing.T, img v1.Image, d v1.Hash) []byte {
	t.Helper()
	l, err := img.LayerByDigest(d)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
