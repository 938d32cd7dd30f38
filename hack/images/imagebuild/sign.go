package imagebuild

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The media types and annotations cosign reads, so `cosign verify --key`
// and admission controllers check these signatures once pushed.
const (
	SimpleSigningType   = types.MediaType("application/vnd.dev.cosign.simplesigning.v1+json")
	DSSEType            = types.MediaType("application/vnd.dsse.envelope.v1+json")
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	PredicateAnnotation = "predicateType"
	InTotoPayloadType   = "application/vnd.in-toto+json"
	SignatureKind       = "cosign container image signature"
)

// SimpleSigning is the payload cosign signs: the repository and the digest.
type SimpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]string `json:"optional,omitempty"`
}

// SignatureTag is the tag cosign keeps the signature of digest under; the
// attestation's ends in .att.
func SignatureTag(d v1.Hash, suffix string) string { return d.Algorithm + "-" + d.Hex + "." + suffix }

// Repository is ref without its tag or digest.
func Repository(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// signatureImage is b's signature as cosign stores it: one layer holding
// the simple-signing payload, the signature in its annotation.
func signatureImage(b *Built, key *ecdsa.PrivateKey, revision string, at time.Time) (v1.Image, error) {
	return signatureFor(Repository(b.Ref), b.Digest, key, revision, at)
}

// signatureFor is the signature of the manifest digest in repository repo
// (an image's index or the chart's manifest).
func signatureFor(repo string, digest v1.Hash, key *ecdsa.PrivateKey, revision string, at time.Time) (v1.Image, error) {
	var p SimpleSigning
	p.Critical.Identity.DockerReference = repo
	p.Critical.Image.DockerManifestDigest = digest.String()
	p.Critical.Type = SignatureKind
	p.Optional = map[string]string{"revision": revision}
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	sig, err := signBlob(key, payload)
	if err != nil {
		return nil, err
	}
	return artifact(at, mutate.Addendum{Layer: static.NewLayer(payload, SimpleSigningType), Annotations: map[string]string{SignatureAnnotation: sig}})
}

// attestation is an in-toto statement and its predicate's type.
type attestation struct {
	predicateType string
	statement     []byte
}

// attestationImage is b's attestations as cosign stores them: one layer
// per statement, each a DSSE envelope around it, as `cosign attest` adds
// them one after another.
func attestationImage(key *ecdsa.PrivateKey, at time.Time, atts ...attestation) (v1.Image, error) {
	var layers []mutate.Addendum
	for _, a := range atts {
		env, err := SignEnvelope(key, a.statement)
		if err != nil {
			return nil, err
		}
		// cosign reads every layer of an attestation as a signature: the
		// signature annotation must be there, empty (the envelope holds it).
		layers = append(layers, mutate.Addendum{Layer: static.NewLayer(env, DSSEType),
			Annotations: map[string]string{PredicateAnnotation: a.predicateType, SignatureAnnotation: ""}})
	}
	return artifact(at, layers...)
}

// SignEnvelope is an in-toto statement in a DSSE envelope signed by key,
// as JSON.
func SignEnvelope(key *ecdsa.PrivateKey, statement []byte) ([]byte, error) {
	sig, err := signBlob(key, pae(InTotoPayloadType, statement))
	if err != nil {
		return nil, err
	}
	return json.Marshal(Envelope{PayloadType: InTotoPayloadType, Payload: base64.StdEncoding.EncodeToString(statement),
		Signatures: []EnvelopeSignature{{Sig: sig}}})
}

func artifact(at time.Time, layers ...mutate.Addendum) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(img, layers...)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: at})
}

// Envelope is a DSSE envelope.
type Envelope struct {
	PayloadType string              `json:"payloadType"`
	Payload     string              `json:"payload"`
	Signatures  []EnvelopeSignature `json:"signatures"`
}

// EnvelopeSignature is one signature of an Envelope.
type EnvelopeSignature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// pae is DSSE's pre-authentication encoding, what the envelope signs.
func pae(payloadType string, payload []byte) []byte {
	return fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(payload), payload)
}

func signBlob(key *ecdsa.PrivateKey, blob []byte) (string, error) {
	h := sha256.Sum256(blob)
	sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
	return base64.StdEncoding.EncodeToString(sig), err
}

func verifyBlob(pub *ecdsa.PublicKey, blob []byte, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	h := sha256.Sum256(blob)
	return err == nil && ecdsa.VerifyASN1(pub, h[:], raw)
}
