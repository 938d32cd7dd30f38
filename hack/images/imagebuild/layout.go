package imagebuild

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// RefName is the OCI layout annotation naming a manifest (podman and
// skopeo read oci:DIR:NAME by it).
const RefName = "org.opencontainers.image.ref.name"

// LayoutDir is where image name's OCI layout is written under out.
func LayoutDir(out, name string) string { return filepath.Join(out, "oci", name) }

// Write writes each image's OCI layout under out: the index named by its
// tag, its signature and its attestations (SLSA provenance and SPDX SBOM)
// named by cosign's tags, and a summary (images.json) of digests and sizes.
func Write(ctx context.Context, o Options, built []*Built, key *ecdsa.PrivateKey) error {
	for _, b := range built {
		if err := writeOne(ctx, o, b, key); err != nil {
			return fmt.Errorf("%s: %w", b.Spec.Name, err)
		}
	}
	return writeSummary(filepath.Join(o.Out, "images.json"), built)
}

func writeOne(ctx context.Context, o Options, b *Built, key *ecdsa.PrivateKey) error {
	dir := LayoutDir(o.Out, b.Spec.Name)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(b.Index, layout.WithAnnotations(map[string]string{RefName: o.Tag})); err != nil {
		return err
	}
	sig, err := signatureImage(b, key, o.Source.Revision, o.Source.Time)
	if err != nil {
		return err
	}
	att, err := attestations(ctx, o, b, key)
	if err != nil {
		return err
	}
	if err := p.AppendImage(sig, layout.WithAnnotations(map[string]string{RefName: SignatureTag(b.Digest, "sig")})); err != nil {
		return err
	}
	return p.AppendImage(att, layout.WithAnnotations(map[string]string{RefName: SignatureTag(b.Digest, "att")}))
}

// attestations is b's attestation artifact: its SLSA provenance, then its
// SPDX SBOM, both signed by key.
func attestations(ctx context.Context, o Options, b *Built, key *ecdsa.PrivateKey) (v1.Image, error) {
	prov, err := provenance(ctx, b, o.Source, o.Platforms)
	if err != nil {
		return nil, err
	}
	bom, err := sbomStatement(ctx, b, o.Source, o.Tag)
	if err != nil {
		return nil, err
	}
	return attestationImage(key, o.Source.Time, attestation{SLSAProvenance, prov}, attestation{SPDXDocument, bom})
}

// Summary is images.json: what a release notes and the chart pins.
type Summary struct {
	Image     string            `json:"image"`
	Digest    string            `json:"digest"`
	Layout    string            `json:"layout"`
	Platforms []PlatformSummary `json:"platforms"`
}

// PlatformSummary is one platform's image in the summary.
type PlatformSummary struct {
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	Bytes    int64  `json:"compressedBytes"`
}

func writeSummary(path string, built []*Built) error {
	var out []Summary
	for _, b := range built {
		s := Summary{Image: b.Ref, Digest: b.Digest.String(), Layout: filepath.Join("oci", b.Spec.Name)}
		for _, p := range b.Platforms {
			s.Platforms = append(s.Platforms, PlatformSummary{Platform: p.Platform.String(), Digest: p.Digest.String(), Bytes: p.Size})
		}
		out = append(out, s)
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
