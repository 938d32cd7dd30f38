package evidence

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing/fstest"

	"github.com/taugrid/taugrid/render"
)

// RenderInputs is what rendering an attempt needs besides the tau file and
// the policy files: the render-inputs.json artifact.
type RenderInputs struct {
	TauFile   string            `json:"tau_file"`
	Overrides map[string]string `json:"overrides,omitempty"`
	Tenant    string            `json:"tenant"`
	Run       render.Run        `json:"run"`
	// PolicyDigest is the digest of the whole policy at the commit the
	// attempt was rendered under; the bundle holds only the part that
	// applied to the tenant (render.Policy.AppliedTo), whose own digest
	// differs. Empty in bundles that hold the whole policy.
	PolicyDigest string `json:"policy_digest,omitempty"`
}

// Rerender renders an attempt from its inputs, as the controller did when
// it submitted it: the manifests.yaml artifact.
func Rerender(in RenderInputs, tauFile []byte, policy map[string][]byte) ([]byte, error) {
	rc, err := render.LoadConfigWithOverrides(in.TauFile, tauFile, in.Overrides)
	if err != nil {
		return nil, err
	}
	fsys := fstest.MapFS{}
	for name, data := range policy {
		fsys[name] = &fstest.MapFile{Data: data}
	}
	pol, err := render.LoadPolicy(fsys)
	if err != nil {
		return nil, err
	}
	if in.PolicyDigest != "" {
		pol.Digest = in.PolicyDigest // rendered into the manifests: the whole policy's
	}
	objs, err := render.RenderConfig(rc, pol, in.Tenant, in.Run)
	if err != nil {
		return nil, err
	}
	return render.Marshal(objs, render.FormatYAML)
}

// BlobReader reads artifact content by digest: a Store, or the evidence
// page's blob URLs.
type BlobReader interface {
	Blob(ctx context.Context, digest string) ([]byte, error)
}

// Report is the outcome of verifying one bundle.
type Report struct {
	Key    Key    `json:"key"`
	Digest string `json:"digest"`
	// Checked counts artifacts whose digest matched.
	Checked    int  `json:"checked"`
	Reproduced bool `json:"reproduced"`
	// Attestation is what the attestation's check found; nil when it was
	// not checked or did not verify.
	Attestation *AttestationReport `json:"attestation,omitempty"`
	// Problems are mismatches and missing artifacts; empty means verified.
	Problems []string `json:"problems,omitempty"`
	// Notes say what was not checked, and why.
	Notes []string `json:"notes,omitempty"`
}

// OK says whether the bundle verified.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Verify recomputes the digest of every artifact of a sealed manifest and
// re-renders its manifests from its recorded inputs, byte for byte.
func Verify(ctx context.Context, raw []byte, blobs BlobReader) *Report {
	r, _, _ := verify(ctx, raw, blobs)
	return r
}

// VerifyAttested verifies a bundle as Verify does, and its attestation
// (a DSSE envelope; nil when the store has none) against key.
func VerifyAttested(ctx context.Context, raw []byte, blobs BlobReader, envelope []byte, key *PublicKey) *Report {
	r, m, content := verify(ctx, raw, blobs)
	switch {
	case m == nil || len(r.Problems) > 0:
		r.problem("attestation: not checked, the bundle does not verify")
	case envelope == nil:
		r.problem("attestation: %v", ErrNoAttestation)
	default:
		a, err := verifyAttestation(ctx, envelope, key, m, raw, content)
		if err != nil {
			r.problem("attestation: %v", err)
		}
		r.Attestation = a
	}
	return r
}

func verify(ctx context.Context, raw []byte, blobs BlobReader) (*Report, *Manifest, map[string][]byte) {
	r := &Report{Digest: "sha256:" + digestOf(raw)}
	m, err := ParseManifest(raw)
	if err != nil {
		r.problem("%v", err)
		return r, nil, nil
	}
	r.Key = m.Key
	content := map[string][]byte{}
	for _, a := range m.Artifacts {
		data, err := blobs.Blob(ctx, a.SHA256)
		switch {
		case err != nil:
			r.problem("%s: %v", a.Name, err)
		case digestOf(data) != a.SHA256 || int64(len(data)) != a.Size:
			r.problem("%s: content does not match its digest sha256:%s (tampered or corrupt)", a.Name, a.SHA256)
		default:
			r.Checked++
			content[a.Name] = data
		}
	}
	if len(r.Problems) == 0 {
		r.reproduce(content)
	}
	return r, m, content
}

// reproduce re-renders the attempt and compares with manifests.yaml.
func (r *Report) reproduce(content map[string][]byte) {
	var in RenderInputs
	if err := json.Unmarshal(content[ArtifactRenderInputs], &in); err != nil {
		r.problem("%s: %v", ArtifactRenderInputs, err)
		return
	}
	tau, ok := content[PrefixTauFile+in.TauFile]
	if !ok {
		r.problem("the bundle lacks %s%s", PrefixTauFile, in.TauFile)
		return
	}
	policy := map[string][]byte{}
	for name, data := range content {
		if p, ok := strings.CutPrefix(name, PrefixPolicy); ok {
			policy[p] = data
		}
	}
	got, err := Rerender(in, tau, policy)
	switch {
	case err != nil:
		r.problem("re-rendering from the recorded inputs: %v", err)
	case !bytes.Equal(got, content[ArtifactManifests]):
		r.problem("re-rendering from the recorded inputs does not reproduce %s byte for byte", ArtifactManifests)
	default:
		r.Reproduced = true
	}
}
