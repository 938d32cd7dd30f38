package evidence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	attv1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// PayloadTypeInToto is the DSSE payload type of an in-toto statement.
const PayloadTypeInToto = "application/vnd.in-toto+json"

// KeySource gives the key that signs attestations; an error stops sealing.
type KeySource interface {
	Key(ctx context.Context) (*AttestationKey, error)
}

// Attest signs the in-toto statement of a sealed bundle: its subjects are
// the manifest (named by its store path) and every artifact (by name),
// by sha256; its predicate is PredicateOf the bundle. The result is a
// DSSE envelope, as JSON, that `cosign verify-blob-attestation` reads.
func Attest(ctx context.Context, s *Sealed, k *AttestationKey) ([]byte, error) {
	payload, err := statementOf(s)
	if err != nil {
		return nil, fmt.Errorf("the attestation of %s: %w", s.Manifest.Key, err)
	}
	signer, err := dsse.NewEnvelopeSigner(k.signer)
	if err != nil {
		return nil, err
	}
	env, err := signer.SignPayload(ctx, PayloadTypeInToto, payload)
	if err != nil {
		return nil, fmt.Errorf("signing the attestation of %s: %w", s.Manifest.Key, err)
	}
	data, err := json.MarshalIndent(env, "", "  ")
	return append(data, '\n'), err
}

// statementOf is the bundle's in-toto Statement v1, as JSON.
func statementOf(s *Sealed) ([]byte, error) {
	content := map[string][]byte{}
	for _, a := range s.Manifest.Artifacts {
		content[a.Name] = s.Blobs[a.SHA256]
	}
	p, err := PredicateOf(s.Manifest, content)
	if err != nil {
		return nil, err
	}
	pred, err := toStruct(p)
	if err != nil {
		return nil, err
	}
	st := &attv1.Statement{Type: attv1.StatementTypeUri, Subject: subjectsOf(s.Manifest, s.Raw), PredicateType: PredicateRunV1, Predicate: pred}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	data, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	return compactJSON(data)
}

// subjectsOf names the manifest by its store path, then every artifact.
func subjectsOf(m *Manifest, raw []byte) []*attv1.ResourceDescriptor {
	out := []*attv1.ResourceDescriptor{{Name: m.Key.Path(), Digest: map[string]string{"sha256": digestOf(raw)}}}
	for _, a := range m.Artifacts {
		out = append(out, &attv1.ResourceDescriptor{Name: a.Name, Digest: map[string]string{"sha256": a.SHA256}})
	}
	return out
}

func toStruct(v any) (*structpb.Struct, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(data, s)
}

// compactJSON drops the whitespace protojson varies from build to build.
func compactJSON(data []byte) ([]byte, error) {
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// AttestationReport is what verifying a bundle's attestation checked.
type AttestationReport struct {
	// Signer is the fingerprint of the key the signature verified with.
	Signer        string    `json:"signer"`
	PredicateType string    `json:"predicate_type"`
	Subjects      []Subject `json:"subjects"`
	Repository    string    `json:"repository"`
	Commit        string    `json:"commit"`
	PolicyCommit  string    `json:"policy_commit"`
	PolicyDigest  string    `json:"policy_digest"`
}

// Subject is one subject of a statement.
type Subject struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// ErrNoAttestation: the bundle was sealed without an attestation.
var ErrNoAttestation = errors.New("the bundle has no attestation")

// verifyAttestation checks, in order, that the envelope is DSSE around an
// in-toto statement, that its signature verifies with key, that its
// subjects are exactly the bundle's manifest and artifacts, and that its
// predicate is the one the bundle derives. It returns the first problem.
func verifyAttestation(ctx context.Context, envelope []byte, key *PublicKey, m *Manifest, raw []byte, content map[string][]byte) (*AttestationReport, error) {
	env := &dsse.Envelope{}
	if err := json.Unmarshal(envelope, env); err != nil {
		return nil, fmt.Errorf("the attestation is not a DSSE envelope: %w", err)
	}
	if env.PayloadType != PayloadTypeInToto {
		return nil, fmt.Errorf("the attestation's payload type is %q, not in-toto's %q", env.PayloadType, PayloadTypeInToto)
	}
	v, err := dsse.NewEnvelopeVerifier(key.verifier)
	if err != nil {
		return nil, err
	}
	if _, err := v.Verify(ctx, env); err != nil {
		return nil, fmt.Errorf("the attestation's signature does not verify with key %s: %w", key.Fingerprint, err)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return nil, err
	}
	st := &attv1.Statement{}
	if err := protojson.Unmarshal(payload, st); err != nil {
		return nil, fmt.Errorf("the attestation's statement: %w", err)
	}
	if err := checkStatement(st, m, raw); err != nil {
		return nil, err
	}
	if err := checkPredicate(st.GetPredicate(), m, content); err != nil {
		return nil, err
	}
	return reportOf(st, key, m, content)
}

// checkStatement: an in-toto v1 statement of our predicate type whose
// subjects are the bundle's, no more and no fewer.
func checkStatement(st *attv1.Statement, m *Manifest, raw []byte) error {
	if st.GetType() != attv1.StatementTypeUri {
		return fmt.Errorf("the statement's type is %q, not %q", st.GetType(), attv1.StatementTypeUri)
	}
	if st.GetPredicateType() != PredicateRunV1 {
		return fmt.Errorf("the predicate type is %q, not %q", st.GetPredicateType(), PredicateRunV1)
	}
	want := subjectsOf(m, raw)
	got := st.GetSubject()
	for i, w := range want {
		if i >= len(got) {
			return fmt.Errorf("the attestation lacks subject %s", w.GetName())
		}
		if got[i].GetName() != w.GetName() || got[i].GetDigest()["sha256"] != w.GetDigest()["sha256"] || len(got[i].GetDigest()) != 1 {
			return fmt.Errorf("subject %s: the attestation signs %s sha256:%s, the bundle holds sha256:%s",
				w.GetName(), got[i].GetName(), got[i].GetDigest()["sha256"], w.GetDigest()["sha256"])
		}
	}
	if len(got) > len(want) {
		return fmt.Errorf("the attestation names subject %s, which the bundle lacks", got[len(want)].GetName())
	}
	return nil
}

// checkPredicate: the signed predicate is what the bundle derives, field
// by field.
func checkPredicate(signed *structpb.Struct, m *Manifest, content map[string][]byte) error {
	p, err := PredicateOf(m, content)
	if err != nil {
		return err
	}
	want, err := toStruct(p)
	if err != nil {
		return err
	}
	for _, field := range sortedFields(want, signed) {
		w, g := jsonOf(want.GetFields()[field]), jsonOf(signed.GetFields()[field])
		if w != g {
			return fmt.Errorf("predicate field %q: the attestation says %s, the bundle says %s", field, g, w)
		}
	}
	return nil
}

// jsonOf is a predicate value as compact JSON, shortened; "nothing" when
// the field is absent.
func jsonOf(v *structpb.Value) string {
	if v == nil {
		return "nothing"
	}
	data, err := protojson.Marshal(v)
	if err == nil {
		data, err = compactJSON(data)
	}
	if err != nil {
		return "unreadable"
	}
	if len(data) > 200 {
		return string(data[:200]) + "..."
	}
	return string(data)
}

func sortedFields(a, b *structpb.Struct) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range []*structpb.Struct{a, b} {
		for k := range s.GetFields() {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

func reportOf(st *attv1.Statement, key *PublicKey, m *Manifest, content map[string][]byte) (*AttestationReport, error) {
	p, err := PredicateOf(m, content)
	if err != nil {
		return nil, err
	}
	r := &AttestationReport{Signer: key.Fingerprint, PredicateType: st.GetPredicateType(), Repository: p.Repository.URL,
		Commit: p.Repository.Commit, PolicyCommit: p.Policy.Commit, PolicyDigest: p.Policy.Digest}
	for _, s := range st.GetSubject() {
		r.Subjects = append(r.Subjects, Subject{Name: s.GetName(), SHA256: s.GetDigest()["sha256"]})
	}
	return r, nil
}
