package evidence

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// testAttestationKey is a fresh key and its public half.
func testAttestationKey(t testing.TB) (*AttestationKey, *PublicKey) {
	t.Helper()
	priv, pub, err := NewAttestationKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseAttestationKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k, p
}

var attestKey = Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 2}

// attestedRecord is the record of a run that was preempted once, then
// admitted through an admission check and ran on two nodes.
func attestedRecord(rec *Record) {
	start, end := sealTime.Add(-time.Hour), sealTime.Add(-time.Minute)
	rec.Run.RepositoryURL, rec.Run.Target = "https://git.example/team-a/research.git", "default"
	rec.Trigger = Trigger{Kind: "Tag", Ref: "refs/tags/tau-run-1a2b", Requester: "ada@example.com",
		Signature: "verified: tag abc signed by ada@example.com with ssh key SHA256:ada",
		Signer:    &Signer{Method: "ssh", Principal: "ada@example.com", Fingerprint: "SHA256:ada", Object: "tag abc"}}
	rec.Inputs = Inputs{TauFile: "tau.yaml", ConfigDigest: "sha256:" + strings.Repeat("d", 64), PolicyCommit: strings.Repeat("b", 40),
		PolicyDigest: "sha256:" + strings.Repeat("e", 64)}
	rec.Attempts = []AttemptInfo{
		{Number: 1, Workload: "job-research-1a2b-1", FailureClass: "Preempted", Nodes: []string{"gpu-1"}},
		{Number: 2, Workload: "job-research-1a2b-2", Start: &start, End: &end, Nodes: []string{"gpu-1", "gpu-2"}, GPUUsage: &GPUUsage{GPUs: 2, UUIDs: []string{"GPU-aa", "GPU-bb"}}},
	}
	rec.Kueue = &KueueTimeline{Workload: "job-research-1a2b-2-x", Queue: "team-a", ClusterQueue: "h200",
		Flavors:         map[string]string{"main/nvidia.com/gpu": "h200"},
		Conditions:      []Condition{{Type: "QuotaReserved", Status: "True", Time: start}, {Type: "Admitted", Status: "True", Time: start}},
		AdmissionChecks: []AdmissionCheck{{Name: "tau-policy", State: "Ready", Message: "the policy allows it", Time: start}}}
	image := "ghcr.io/team-a/train@sha256:" + strings.Repeat("f", 64)
	rec.Pods = []PodRecord{
		{Name: "research-1a2b-2-b", Node: "gpu-2", Containers: []ContainerRecord{{Name: "main", Image: image, ImageID: image}}},
		{Name: "research-1a2b-2-a", Node: "gpu-1", Containers: []ContainerRecord{{Name: "main", Image: image, ImageID: image},
			{Name: "source", Init: true, Image: "ghcr.io/taugrid/tau:v1"}}},
	}
	rec.Nodes = []NodeRecord{{Name: "gpu-1", GPUHealthyAtStart: "True"}, {Name: "gpu-2", GPUHealthyAtStart: "True"}}
}

// attestedBundle is a sealed bundle of attestedRecord with its attestation.
func attestedBundle(t testing.TB, k *AttestationKey) *Sealed {
	t.Helper()
	s, err := exampleBundleWith(t, attestKey, "loss 0.1\n", attestedRecord).Seal(sealTime)
	if err != nil {
		t.Fatal(err)
	}
	if s.Attestation, err = Attest(context.Background(), s, k); err != nil {
		t.Fatal(err)
	}
	return s
}

// blobMap serves a sealed bundle's blobs.
type blobMap map[string][]byte

func (b blobMap) Blob(_ context.Context, d string) ([]byte, error) {
	if data, ok := b[d]; ok {
		return data, nil
	}
	return nil, ErrNotFound
}

func TestASealedRunsAttestationSaysWhatTheBundleHolds(t *testing.T) {
	k, pub := testAttestationKey(t)
	s := attestedBundle(t, k)
	r := VerifyAttested(context.Background(), s.Raw, blobMap(s.Blobs), s.Attestation, pub)
	if !r.OK() {
		t.Fatalf("problems: %v", r.Problems)
	}
	if r.Attestation.Signer != pub.Fingerprint || r.Attestation.Commit != strings.Repeat("a", 40) ||
		r.Attestation.PolicyCommit != strings.Repeat("b", 40) || len(r.Attestation.Subjects) != len(s.Manifest.Artifacts)+1 {
		t.Errorf("report: %+v", r.Attestation)
	}

	st := statementIn(t, s.Attestation)
	var p RunPredicate
	data, _ := json.Marshal(st["predicate"])
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	start := sealTime.Add(-time.Hour)
	tau, _ := s.Manifest.Artifact("tau-file/tau.yaml")
	want := RunPredicate{
		Bundle:     PredicateBundle{Namespace: "team-a", Run: "research-1a2b", Attempt: 2, SealedAt: sealTime},
		Repository: PredicateRepository{Name: "research", URL: "https://git.example/team-a/research.git", Commit: strings.Repeat("a", 40), Target: "default"},
		TauFile:    PredicateTauFile{Path: "tau.yaml", SHA256: "sha256:" + tau.SHA256, ConfigDigest: "sha256:" + strings.Repeat("d", 64)},
		Policy:     PredicatePolicy{Commit: strings.Repeat("b", 40), Digest: "sha256:" + strings.Repeat("e", 64)},
		Images: []PredicateImage{{Image: "ghcr.io/taugrid/tau:v1"},
			{Image: "ghcr.io/team-a/train@sha256:" + strings.Repeat("f", 64), Digest: "sha256:" + strings.Repeat("f", 64)}},
		Trigger: PredicateTrigger{Kind: "Tag", Ref: "refs/tags/tau-run-1a2b", Requester: "ada@example.com",
			Signature: "verified: tag abc signed by ada@example.com with ssh key SHA256:ada",
			Signer:    &Signer{Method: "ssh", Principal: "ada@example.com", Fingerprint: "SHA256:ada", Object: "tag abc"}},
		Admission: &PredicateAdmission{Workload: "job-research-1a2b-2-x", Queue: "team-a", ClusterQueue: "h200", Admitted: "True",
			AdmittedAt: &start, Flavors: map[string]string{"main/nvidia.com/gpu": "h200"},
			Checks: []AdmissionCheck{{Name: "tau-policy", State: "Ready", Message: "the policy allows it", Time: start}}},
		Nodes: []PredicateNode{{Name: "gpu-1", Pods: []string{"research-1a2b-2-a"}, GPUHealthyAtStart: "True"},
			{Name: "gpu-2", Pods: []string{"research-1a2b-2-b"}, GPUHealthyAtStart: "True"}},
		Attempts: []PredicateAttempt{{Number: 1, Workload: "job-research-1a2b-1", FailureClass: "Preempted", Nodes: []string{"gpu-1"}},
			{Number: 2, Workload: "job-research-1a2b-2", Start: &start, End: ptrTime(sealTime.Add(-time.Minute)), Nodes: []string{"gpu-1", "gpu-2"}, GPUs: 2, GPUUUIDs: []string{"GPU-aa", "GPU-bb"}}},
		Preemptions: 1,
		Outcome:     "Succeeded",
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("predicate (-want +got):\n%s", diff)
	}
	if st["_type"] != "https://in-toto.io/Statement/v1" || st["predicateType"] != PredicateRunV1 {
		t.Errorf("statement type %v, predicate type %v", st["_type"], st["predicateType"])
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// statementIn decodes the statement of an envelope.
func statementIn(t testing.TB, envelope []byte) map[string]any {
	t.Helper()
	var env struct{ Payload string }
	if err := json.Unmarshal(envelope, &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]any{}
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// editEnvelope changes an envelope's JSON, keeping its signature.
func editEnvelope(t testing.TB, envelope []byte, edit func(env, statement map[string]any)) []byte {
	t.Helper()
	env := map[string]any{}
	if err := json.Unmarshal(envelope, &env); err != nil {
		t.Fatal(err)
	}
	st := statementIn(t, envelope)
	edit(env, st)
	payload, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := env["payload"].(string); kept {
		env["payload"] = base64.StdEncoding.EncodeToString(payload)
	}
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tampering is what an attacker changes, one field family each.
var tampering = map[string]func(env, st map[string]any){
	"a subject's digest": func(_, st map[string]any) {
		st["subject"].([]any)[1].(map[string]any)["digest"].(map[string]any)["sha256"] = strings.Repeat("0", 64)
	},
	"a predicate field": func(_, st map[string]any) {
		st["predicate"].(map[string]any)["repository"].(map[string]any)["commit"] = strings.Repeat("9", 40)
	},
	"the payload type": func(env, _ map[string]any) { env["payloadType"] = "application/json" },
	"the signature": func(env, _ map[string]any) {
		sig := env["signatures"].([]any)[0].(map[string]any)
		raw, _ := base64.StdEncoding.DecodeString(sig["sig"].(string))
		raw[len(raw)-1] ^= 1
		sig["sig"] = base64.StdEncoding.EncodeToString(raw)
	},
}

func TestATamperedAttestationIsRefusedNamingWhatFailed(t *testing.T) {
	k, pub := testAttestationKey(t)
	s := attestedBundle(t, k)
	want := map[string]string{
		"a subject's digest": "signature does not verify",
		"a predicate field":  "signature does not verify",
		"the payload type":   "payload type is \"application/json\"",
		"the signature":      "signature does not verify",
	}
	for name, edit := range tampering {
		t.Run(name, func(t *testing.T) {
			r := VerifyAttested(context.Background(), s.Raw, blobMap(s.Blobs), editEnvelope(t, s.Attestation, edit), pub)
			if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), want[name]) {
				t.Errorf("problems %q, want one saying %q", r.Problems, want[name])
			}
		})
	}
}

// TestAnAttestationSignedOverADifferentBundleIsRefused: whoever holds the
// key but not the bundle, or another key, cannot vouch for this bundle.
func TestAnAttestationSignedOverADifferentBundleIsRefused(t *testing.T) {
	k, pub := testAttestationKey(t)
	s := attestedBundle(t, k)
	other, _ := testAttestationKey(t)
	otherSigned, err := Attest(context.Background(), s, other)
	if err != nil {
		t.Fatal(err)
	}
	// The same key signs a bundle whose record says another commit.
	forged, err := exampleBundleWith(t, attestKey, "loss 0.1\n", func(r *Record) { attestedRecord(r); r.Run.Commit = strings.Repeat("9", 40) }).Seal(sealTime)
	if err != nil {
		t.Fatal(err)
	}
	forgedSigned, err := Attest(context.Background(), forged, k)
	if err != nil {
		t.Fatal(err)
	}
	tamperedBlobs := blobMap{}
	for d, data := range s.Blobs {
		tamperedBlobs[d] = data
	}
	rec, _ := s.Manifest.Artifact(ArtifactRecord)
	tamperedBlobs[rec.SHA256] = append([]byte(nil), s.Blobs[rec.SHA256]...)
	tamperedBlobs[rec.SHA256][10] ^= 1

	for name, c := range map[string]struct {
		envelope []byte
		blobs    blobMap
		want     string
	}{
		"another key signed it":               {otherSigned, blobMap(s.Blobs), "does not verify with key " + pub.Fingerprint},
		"it attests another bundle":           {forgedSigned, blobMap(s.Blobs), "subject bundles/team-a/research-1a2b/2.json"},
		"a byte of an artifact changed":       {s.Attestation, tamperedBlobs, "record.json: content does not match"},
		"the store holds no attestation":      {nil, blobMap(s.Blobs), "no attestation"},
		"the envelope is not JSON":            {[]byte("{"), blobMap(s.Blobs), "not a DSSE envelope"},
		"the right key signed another record": {signedPredicateOf(t, k, s, forged), blobMap(s.Blobs), `predicate field "repository"`},
		"the right key signed a predicate without its trigger": {signedWithout(t, k, s, "trigger"), blobMap(s.Blobs),
			`predicate field "trigger": the attestation says nothing`},
	} {
		t.Run(name, func(t *testing.T) {
			r := VerifyAttested(context.Background(), s.Raw, c.blobs, c.envelope, pub)
			if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), c.want) {
				t.Errorf("problems %q, want one saying %q", r.Problems, c.want)
			}
		})
	}
}

// signedPredicateOf signs s's subjects with the predicate of another
// bundle: the statement names the right digests but claims what the
// bundle does not back.
func signedPredicateOf(t testing.TB, k *AttestationKey, s, other *Sealed) []byte {
	t.Helper()
	rec, _ := other.Manifest.Artifact(ArtifactRecord)
	own, _ := s.Manifest.Artifact(ArtifactRecord)
	blobs := map[string][]byte{}
	for d, data := range s.Blobs {
		blobs[d] = data
	}
	blobs[own.SHA256] = other.Blobs[rec.SHA256] // the predicate reads another record, the subject keeps this one's digest
	env, err := Attest(context.Background(), &Sealed{Manifest: s.Manifest, Raw: s.Raw, Blobs: blobs}, k)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// signedWithout signs s's statement with one predicate field dropped.
func signedWithout(t testing.TB, k *AttestationKey, s *Sealed, field string) []byte {
	t.Helper()
	st := statementIn(t, s.Attestation)
	delete(st["predicate"].(map[string]any), field)
	payload, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := dsse.NewEnvelopeSigner(k.signer)
	if err != nil {
		t.Fatal(err)
	}
	env, err := signer.SignPayload(context.Background(), PayloadTypeInToto, payload)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(env)
	return data
}

func TestAnUnparsableKeyIsRefusedWithoutQuotingIt(t *testing.T) {
	priv, pub, _ := NewAttestationKeyPEM()
	for name, data := range map[string][]byte{
		"empty":                  nil,
		"the public key":         pub,
		"a truncated key":        priv[:len(priv)/2],
		"an EC key not PKCS#8":   []byte("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----\n"),
		"garbage inside the PEM": []byte("-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n"),
	} {
		_, err := ParseAttestationKey(data)
		if err == nil || strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), "MHcC") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
