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
	Packages  int // packages the SBOM lists
}

// Verify checks the layout at dir as an admission policy would, and more:
// the index under tag is signed by pub for its repository, its provenance
// attestation is signed by pub, names the index and the commit its labels
// name, a Go version and the module graph, its SBOM attestation is signed
// by pub and describes the index under its name and tag, and every
// platform's image runs as 65532:65532 with the same revision label.
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
	atts, err := v.attestations(top, named, pub)
	if err != nil {
		return nil, err
	}
	if err := v.checkProvenance(atts[SLSAProvenance]); err != nil {
		return nil, err
	}
	return v, v.checkSBOM(atts[SPDXDocument], tag)
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

// layerBody is one layer of a signature or attestation artifact.
type layerBody struct {
	body        []byte
	annotations map[string]string
}

// artifactLayers are the layers of the artifact tagged tag, each of media
// type mt.
func artifactLayers(top v1.ImageIndex, named map[string]v1.Hash, tag string, mt string) ([]layerBody, error) {
	d, ok := named[tag]
	if !ok {
		return nil, fmt.Errorf("no %s: the image is not signed (want the tag %s)", mt, tag)
	}
	img, err := top.Image(d)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	var out []layerBody
	for _, desc := range m.Layers {
		if string(desc.MediaType) != mt {
			return nil, fmt.Errorf("%s: a layer of %s, want %s", tag, desc.MediaType, mt)
		}
		body, err := layerBytes(img, desc.Digest)
		if err != nil {
			return nil, err
		}
		out = append(out, layerBody{body: body, annotations: desc.Annotations})
	}
	return out, nil
}

func layerBytes(img v1.Image, d v1.Hash) ([]byte, error) {
	l, err := img.LayerByDigest(d)
	if err != nil {
		return nil, err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func (v *Verified) checkSignature(top v1.ImageIndex, named map[string]v1.Hash, pub *ecdsa.PublicKey) error {
	layers, err := artifactLayers(top, named, SignatureTag(v.Digest, "sig"), string(SimpleSigningType))
	if err != nil {
		return err
	}
	if len(layers) != 1 {
		return fmt.Errorf("the signature of %s has %d layers, want one", v.Digest, len(layers))
	}
	payload, ann := layers[0].body, layers[0].annotations
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

// attestations are the signed statements of the image's attestation
// artifact, by predicate type; one that does not verify with pub is an
// error, as is a predicate type twice.
func (v *Verified) attestations(top v1.ImageIndex, named map[string]v1.Hash, pub *ecdsa.PublicKey) (map[string][]byte, error) {
	layers, err := artifactLayers(top, named, SignatureTag(v.Digest, "att"), string(DSSEType))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, l := range layers {
		pt := l.annotations[PredicateAnnotation]
		statement, err := openEnvelope(l.body, pub)
		if err != nil {
			return nil, fmt.Errorf("the %s attestation: %w", pt, err)
		}
		if _, twice := out[pt]; twice {
			return nil, fmt.Errorf("two %s attestations", pt)
		}
		out[pt] = statement
	}
	return out, nil
}

// openEnvelope is the in-toto statement a DSSE envelope holds, if pub
// signed it.
func openEnvelope(body []byte, pub *ecdsa.PublicKey) ([]byte, error) {
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, err
	}
	statement, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil || env.PayloadType != InTotoPayloadType || len(env.Signatures) == 0 {
		return nil, fmt.Errorf("no signed in-toto statement (%q)", env.PayloadType)
	}
	if !verifyBlob(pub, pae(env.PayloadType, statement), env.Signatures[0].Sig) {
		return nil, errors.New("the signature does not verify with this public key")
	}
	return statement, nil
}

func (v *Verified) checkProvenance(statement []byte) error {
	if statement == nil {
		return errors.New("no SLSA provenance attestation")
	}
	var st Statement
	if err := json.Unmarshal(statement, &st); err != nil {
		return fmt.Errorf("the provenance statement: %w", err)
	}
	return v.checkStatement(st)
}

func (v *Verified) checkStatement(st Statement) error {
	bd := st.Predicate.BuildDefinition
	if !v.about(st.Subject) || st.Type != InTotoStatement || st.PredicateType != SLSAProvenance {
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

// about says whether a statement's subjects name the index, in its
// repository.
func (v *Verified) about(subjects []Descriptor) bool {
	return slices.ContainsFunc(subjects, func(d Descriptor) bool { return d.Digest[v.Digest.Algorithm] == v.Digest.Hex && d.Name == v.Ref })
}
