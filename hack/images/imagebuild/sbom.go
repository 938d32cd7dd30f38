package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	spdxjson "github.com/spdx/tools-golang/json"

	"github.com/taugrid/taugrid/hack/sbom"
)

// SPDXDocument is the predicate type of an SBOM attestation, the one
// `cosign verify-attestation --type spdxjson` looks for.
const SPDXDocument = "https://spdx.dev/Document"

// SBOMStatement is an in-toto statement whose predicate is an SPDX
// document, kept as hack/sbom wrote it.
type SBOMStatement struct {
	Type          string          `json:"_type"`
	Subject       []Descriptor    `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// sbomStatement is b's SBOM as an in-toto statement about the same
// subjects as its provenance: the index, then every platform's image.
func sbomStatement(ctx context.Context, b *Built, src Source, tag string) ([]byte, error) {
	var doc bytes.Buffer
	if err := sbom.Write(&doc, imageArtifact(ctx, b, src, tag)); err != nil {
		return nil, err
	}
	return json.Marshal(SBOMStatement{Type: InTotoStatement, Subject: subjects(b), PredicateType: SPDXDocument, Predicate: doc.Bytes()})
}

// imageArtifact is what b's SBOM describes: the index (one document for
// every platform, as cosign finds it by the index's digest), the Go
// modules linked into any platform's binary and the Debian packages whose
// files the image holds.
func imageArtifact(ctx context.Context, b *Built, src Source, tag string) sbom.Artifact {
	a := sbom.Artifact{Name: b.Spec.Name, Version: tag, SHA256: b.Digest.Hex, Purpose: "CONTAINER",
		PURL: sbom.OCIPURL(b.Spec.Name, b.Digest.Hex, Repository(b.Ref), tag), Created: src.Time}
	for i, bp := range b.Platforms {
		g := sbom.FromBuildInfo(bp.binary.info, tag)
		if i == 0 {
			a.Go = g
			continue
		}
		a.Go.Deps = append(a.Go.Deps, g.Deps...) // sbom lists each once
	}
	pkgs := debianPackages(ctx, b)
	for _, name := range sortedKeys(pkgs) {
		a.Debian = append(a.Debian, sbom.DebianPackage{Name: name, Version: pkgs[name]})
	}
	return a
}

// debianPackages are the Debian packages whose files b's images hold
// (the CA bundle's, and glibc's where the binary needs it), with the
// versions installed here.
func debianPackages(ctx context.Context, b *Built) map[string]string {
	pkgs := map[string]string{"ca-certificates": debVersion(ctx, "ca-certificates")}
	for _, bp := range b.Platforms {
		if bp.glibc != "" {
			pkgs[bp.glibc] = debVersion(ctx, bp.glibc)
		}
	}
	return pkgs
}

// subjects are what b's attestations are about: the index, which cosign
// looks them up by, and every platform's image.
func subjects(b *Built) []Descriptor {
	out := []Descriptor{{Name: Repository(b.Ref), Digest: map[string]string{b.Digest.Algorithm: b.Digest.Hex}}}
	for _, bp := range b.Platforms {
		out = append(out, Descriptor{Name: Repository(b.Ref), Digest: map[string]string{bp.Digest.Algorithm: bp.Digest.Hex}})
	}
	return out
}

// checkSBOM checks the SBOM statement: about the index, an SPDX document
// that describes the image by its name, tag and index digest.
func (v *Verified) checkSBOM(statement []byte, tag string) error {
	if statement == nil {
		return errors.New("no SPDX SBOM attestation")
	}
	var st SBOMStatement
	if err := json.Unmarshal(statement, &st); err != nil {
		return fmt.Errorf("the SBOM statement: %w", err)
	}
	if !v.about(st.Subject) || st.Type != InTotoStatement || st.PredicateType != SPDXDocument {
		return fmt.Errorf("the SBOM is not about %s@%s", v.Ref, v.Digest)
	}
	doc, err := spdxjson.Read(bytes.NewReader(st.Predicate))
	if err != nil {
		return fmt.Errorf("the SBOM: %w", err)
	}
	p, err := sbom.Described(doc)
	if err != nil {
		return err
	}
	name := path.Base(v.Ref)
	if p.PackageName != name || p.PackageVersion != tag || len(p.PackageChecksums) != 1 || p.PackageChecksums[0].Value != v.Digest.Hex {
		return fmt.Errorf("the SBOM describes %s %s %v, want %s %s %s", p.PackageName, p.PackageVersion, p.PackageChecksums, name, tag, v.Digest)
	}
	v.Packages = len(doc.Packages)
	return nil
}
