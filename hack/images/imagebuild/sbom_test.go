package imagebuild

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/taugrid/taugrid/hack/sbom"
)

// readAttestations reads the signed statements of b's layout, by predicate
// type, as Verify does.
func readAttestations(t *testing.T, dir string, b *Built, pub *ecdsa.PublicKey) map[string][]byte {
	t.Helper()
	top := must(must(layout.FromPath(dir)).ImageIndex())
	named := map[string]v1.Hash{}
	for _, d := range must(top.IndexManifest()).Manifests {
		named[d.Annotations[RefName]] = d.Digest
	}
	v := &Verified{Digest: b.Digest, Ref: Repository(b.Ref)}
	atts, err := v.attestations(top, named, pub)
	if err != nil {
		t.Fatal(err)
	}
	return atts
}

// TestEachImageHasAnSPDXSBOMOfItsModulesAndDebianPackages reads the SBOM
// attestation beside each index as an SBOM consumer would: an SPDX 2.3
// document that validates, about the index, describing the image by name,
// tag, digest and purl, and listing the Go modules linked in and the
// Debian packages copied (glibc only in the node agent).
func TestEachImageHasAnSPDXSBOMOfItsModulesAndDebianPackages(t *testing.T) {
	o, built := first(t)
	for _, b := range built {
		atts := readAttestations(t, LayoutDir(o.Out, b.Spec.Name), b, &testKey.PublicKey)
		if len(atts) != 2 || atts[SLSAProvenance] == nil || atts[SPDXDocument] == nil {
			t.Fatalf("%s: attestations of %d types, want SLSA provenance and SPDX", b.Ref, len(atts))
		}
		var st SBOMStatement
		if err := json.Unmarshal(atts[SPDXDocument], &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != InTotoStatement || st.Subject[0].Digest["sha256"] != b.Digest.Hex || st.Subject[0].Name != Repository(b.Ref) {
			t.Errorf("%s: statement %s about %+v", b.Ref, st.Type, st.Subject)
		}
		doc, err := spdxjson.Read(bytes.NewReader(st.Predicate))
		if err != nil {
			t.Fatalf("%s: %v", b.Ref, err)
		}
		if err := spdxlib.ValidateDocument(doc); err != nil {
			t.Errorf("%s: the SBOM does not validate: %v", b.Ref, err)
		}
		root := must(sbom.Described(doc))
		wantPURL := sbom.OCIPURL(b.Spec.Name, b.Digest.Hex, Repository(b.Ref), o.Tag)
		if root.PackageName != b.Spec.Name || root.PackageVersion != o.Tag || root.PackageChecksums[0].Value != b.Digest.Hex ||
			root.PackageExternalReferences[0].Locator != wantPURL {
			t.Errorf("%s: the SBOM describes %s %s %v %s", b.Ref, root.PackageName, root.PackageVersion, root.PackageChecksums, root.PackageExternalReferences[0].Locator)
		}
		names := packageNames(doc)
		want := []string{"github.com/taugrid/taugrid", "stdlib", "sigs.k8s.io/yaml", "ca-certificates"}
		if b.Spec.CGO {
			want = append(want, "libc6", "github.com/NVIDIA/go-nvml")
		}
		for _, n := range want {
			if !names[n] {
				t.Errorf("%s: the SBOM lists no %s", b.Ref, n)
			}
		}
		if !b.Spec.CGO && names["libc6"] {
			t.Errorf("%s: the SBOM lists glibc, which the image does not hold", b.Ref)
		}
	}
}

func packageNames(doc *spdx.Document) map[string]bool {
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.PackageName] = true
	}
	return names
}

// TestVerifyRefusesAChangedSBOM: an SBOM statement changed after signing
// (its version, say), or signed with another key, does not verify.
func TestVerifyRefusesAChangedSBOM(t *testing.T) {
	o, built := first(t)
	statement := readAttestations(t, LayoutDir(o.Out, built[0].Spec.Name), built[0], &testKey.PublicKey)[SPDXDocument]
	changed := strings.Replace(string(statement), `"versionInfo":"`+o.Tag+`"`, `"versionInfo":"v0.0.0-changed"`, 1)
	if changed == string(statement) {
		t.Fatal("the SBOM names no version to change")
	}
	var env Envelope
	if err := json.Unmarshal(must(SignEnvelope(testKey, statement)), &env); err != nil {
		t.Fatal(err)
	}
	env.Payload = base64.StdEncoding.EncodeToString([]byte(changed))
	if _, err := openEnvelope(must(json.Marshal(env)), &testKey.PublicKey); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a changed SBOM statement: %v, want a refusal", err)
	}
	other := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	if _, err := openEnvelope(must(SignEnvelope(other, []byte(changed))), &testKey.PublicKey); err == nil {
		t.Error("an SBOM signed with another key verified")
	}
}

// TestVerifyRefusesALayoutWithoutAnSBOM: an attestation artifact holding
// the provenance alone is refused.
func TestVerifyRefusesALayoutWithoutAnSBOM(t *testing.T) {
	o, built := first(t)
	b := built[2]
	atts := readAttestations(t, LayoutDir(o.Out, b.Spec.Name), b, &testKey.PublicKey)
	dir := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dir, os.DirFS(LayoutDir(o.Out, b.Spec.Name))); err != nil {
		t.Fatal(err)
	}
	p := must(layout.FromPath(dir))
	attTag := SignatureTag(b.Digest, "att")
	if err := p.RemoveDescriptors(func(d v1.Descriptor) bool { return d.Annotations[RefName] == attTag }); err != nil {
		t.Fatal(err)
	}
	img := must(attestationImage(testKey, o.Source.Time, attestation{SLSAProvenance, atts[SLSAProvenance]}))
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefName: attTag})); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, o.Tag, &testKey.PublicKey); err == nil || !strings.Contains(err.Error(), "no SPDX SBOM") {
		t.Errorf("a layout without an SBOM: %v", err)
	}
}
