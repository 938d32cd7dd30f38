package sealing

import (
	"context"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/evidence"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestASealedBundleCarriesAnAttestationTheKeysSecretVerifies: the first
// seal creates the key's Secret; the bundle's attestation verifies with
// the Secret's cosign.pub and attests the run's commit, signer and
// admission checks.
func TestASealedBundleCarriesAnAttestationTheKeysSecretVerifies(t *testing.T) {
	run := sealingRun().Obj()
	run.Status.Signature = &taugridv1.SignatureStatus{Verified: true, Method: "ssh", Principal: "ada@example.com",
		Fingerprint: "SHA256:adaskey", Object: "tag " + strings.Repeat("1", 40)}
	w := newSealWorld(t, nil, researchRepo(), hfSecret(), run)
	if _, err := w.e.Reconcile(context.Background(), runR); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := &corev1.Secret{}
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: controllerNS, Name: attestationSecret}, s); err != nil {
		t.Fatalf("the key's Secret: %v", err)
	}
	pub, err := evidence.ParsePublicKey(s.Data[AttestationPublicField])
	if err != nil {
		t.Fatal(err)
	}
	key := evidence.Key{Namespace: ns, Run: "r", Attempt: 1}
	raw, _ := w.store.Manifest(ctx, key)
	env, err := w.store.Attestation(ctx, key)
	if err != nil {
		t.Fatalf("no attestation next to the bundle: %v", err)
	}
	r := evidence.VerifyAttested(ctx, raw, w.store, env, pub)
	if !r.OK() {
		t.Fatalf("problems: %v", r.Problems)
	}
	if r.Attestation.Commit != run.Spec.Commit || r.Attestation.Repository != "https://git.example.com/team-a/research.git" {
		t.Errorf("attested %+v", r.Attestation)
	}
	_, rec, _ := w.bundle(t, 1)
	if rec.Trigger.Signer == nil || rec.Trigger.Signer.Fingerprint != "SHA256:adaskey" {
		t.Errorf("the record's signer: %+v", rec.Trigger.Signer)
	}
}

// TestAKeyThatCannotBeParsedStopsSealing: a Secret whose key does not
// parse seals nothing, says so on the run, and never quotes the key.
func TestAKeyThatCannotBeParsedStopsSealing(t *testing.T) {
	broken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: attestationSecret},
		Data: map[string][]byte{AttestationPrivateField: []byte("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleQ==\n-----END PRIVATE KEY-----\n")}}
	w := newSealWorld(t, nil, researchRepo(), hfSecret(), sealingRun().Obj(), broken)
	_, err := w.e.Reconcile(context.Background(), runR)
	if err == nil {
		t.Fatal("sealed with a key that does not parse")
	}
	if got := w.sealed(t); len(got) != 0 {
		t.Errorf("sealed %v", got)
	}
	c := apimeta.FindStatusCondition(w.run(t).Status.Conditions, shared.ConditionEvidence)
	want := `taugrid-system/tau-attestation-key ("cosign.key"): the attestation key is not a PKCS#8 private key`
	if c == nil || c.Reason != ReasonAttestationKeyUnusable || !strings.Contains(c.Message, want) || strings.Contains(c.Message, "c2VjcmV0") {
		t.Errorf("EvidenceSealed %+v, want %s saying %q", c, ReasonAttestationKeyUnusable, want)
	}
	if got := w.storeHolds(t, "DSSE"); len(got) != 0 {
		t.Errorf("stored %v", got)
	}
}
