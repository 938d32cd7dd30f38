package imagebuild

import (
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Verified is what Verify checked of one image.
type Verified struct {
	Ref       string // registry/name, as signed
	Digest    v1.Hash
	Revision  string
	GoVersion string
	Modules   int // Go modules the provenance names
}

// Verify checks the layout at dir as an admission policy would, and more:
// the index under tag is signed by pub for its repository, its provenance
// attestation is signed by pub, names the index and the commit its labels
// name, a Go version and the module graph, and every platform's image runs
// as 65532:65532 with the same revision label.
func Verify(dir, tag string, pub *ecdsa.PublicKey) (*Verified, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	named := map[string]v1.Hash{}
	for _, d := range im.Manifests {
		named[d.Annotations[RefName]] = d.Digest
	}
	d, ok := named[tag]
	if !ok {
		return nil, fmt.Errorf("%s holds no image tagged %q", dir, tag)
	}
	idx, err := top.ImageIndex(d)
	if err != nil {
		return nil, err
	}
	v := &Verified{Digest: d}
	if err := v.checkIndex(idx); err != nil {
		return nil, err
	}
	if err := v.checkSignature(top, named, pub); err != nil {
		return nil, err
	}
	return v, v.checkProvenance(top, named, pub)
}

// checkIndex reads the revision and checks every platform's config.
func (v *Verified) checkIndex(idx v1.ImageIndex) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	v.Revision = im.Annotations["org.opencontainers.image.revision"]
	if v.Revision == "" || len(im.Manifests) == 0 {
		return errors.New("the index names no revision or no platform")
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		if cf.Config.User != fmt.Sprintf("%d:%d", UID, GID) || cf.Config.Labels["org.opencontainers.image.revision"] != v.Revision {
			return fmt.Errorf("%s image %s: user %q, revision %q; want %d:%d and %s", d.Platform, d.Digest, cf.Config.User,
				cf.Config.Labels["org.opencontainers.image.revision"], UID, GID, v.Revision)
		}
	}
	return nil
}

// artifactLayer is the single layer of the artifact tagged tag, and its
// annotations.
func artifactLayer(top v1.ImageIndex, named map[string]v1.Hash, tag string, mt string) ([]byte, map[string]string, error) {
	d, ok := named[tag]
	if !ok {
		return nil, nil, fmt.Errorf("no %s: the image is not signed (want the tag %s)", mt, tag)
	}
	img, err := top.Image(d)
	if err != nil {
		return nil, nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, err
	}
	if len(m.Layers) != 1 || string(m.Layers[0].MediaType) != mt {
		return nil, nil, fmt.Errorf("%s: want one layer of %s", tag, mt)
	}
	l, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return nil, nil, err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	return body, m.Layers[0].Annotations, err
}

func (v *Verified) checkSignature(top v1.ImageIndex, named map[string]v1.Hash, pub *ecdsa.PublicKey) error {
	payload, ann, err := artifactLayer(top, named, SignatureTag(v.Digest, "sig"), string(SimpleSigningType))
	if err != nil {
		return err
	}
	if !verifyBlob(pub, payload, ann[SignatureAnnotation]) {
		return fmt.Errorf("the signature of %s does not verify with this public key", v.Digest)
	}
	var s SimpleSigning
	if err := json.Unmarshal(payload, &s); err != nil {
		return fmt.Errorf("the signed payload: %w", err)
	}
	if s.Critical.Image.DockerManifestDigest != v.Digest.String() || s.Critical.Type != SignatureKind {
		return fmt.Errorf("the signature is of %s (%q), not of %s", s.Critical.Image.DockerManifestDigest, s.Critical.Type, v.Digest)
	}
	v.Ref = s.Critical.Identity.DockerReference
	return nil
}

func (v *Verified) checkProvenance(top v1.ImageIndex, named map[string]v1.Hash, pub *ecdsa.PublicKey) error {
	body, ann, err := artifactLayer(top, named, SignatureTag(v.Digest, "att"), string(DSSEType))
	if err != nil {
		return err
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("the attestation: %w", err)
	}
	statement, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil || ann[PredicateAnnotation] != SLSAProvenance || env.PayloadType != InTotoPayloadType || len(env.Signatures) == 0 {
		return fmt.Errorf("the attestation is no signed in-toto SLSA provenance (%q, %q)", env.PayloadType, ann[PredicateAnnotation])
	}
	if !verifyBlob(pub, pae(env.PayloadType, statement), env.Signatures[0].Sig) {
		return errors.New("the provenance's signature does not verify with this public key")
	}
	var st Statement
	if err := json.Unmarshal(statement, &st); err != nil {
		return fmt.Errorf("the provenance statement: %w", err)
	}
	return v.checkStatement(st)
}

func (v *Verified) checkStatement(st Statement) error {
	subject := slices.ContainsFunc(st.Subject, func(d Descriptor) bool { return d.Digest[v.Digest.Algorithm] == v.Digest.Hex && d.Name == v.Ref })
	bd := st.Predicate.BuildDefinition
	if !subject || st.Type != InTotoStatement || st.PredicateType != SLSAProvenance {
		return fmt.Errorf("the provenance is not about %s@%s", v.Ref, v.Digest)
	}
	if got := bd.ExternalParameters.Source.Digest["gitCommit"]; got != v.Revision {
		return fmt.Errorf("the provenance names commit %q, the image's labels %q", got, v.Revision)
	}
	for _, b := range bd.InternalParameters.Binaries {
		if !strings.HasPrefix(b.GoVersion, "go") {
			return fmt.Errorf("the provenance names no Go version for %s", b.Platform)
		}
		v.GoVersion = b.GoVersion
	}
	for _, d := range bd.ResolvedDependencies {
		if strings.HasPrefix(d.URI, "pkg:golang/") {
			v.Modules++
		}
	}
	if v.GoVersion == "" || v.Modules == 0 {
		return errors.New("the provenance names no binary or no Go module")
	}
	return nil
}
