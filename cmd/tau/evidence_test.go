package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
)

// sealedStore writes the bundle of a run of the example research repo
// into a fresh store directory.
func sealedStore(t *testing.T) (*evidence.FileStore, *evidence.Sealed) {
	t.Helper()
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	tau := read(filepath.Join(research, "tau.yaml"))
	policy := map[string][]byte{}
	for _, n := range []string{"tenants.yaml", "profiles.yaml", "images.yaml", "priorities.yaml", "limits.yaml", "security.yaml"} {
		policy[n] = read(filepath.Join(platform, n))
	}
	in := evidence.RenderInputs{TauFile: "tau.yaml", Tenant: "team-a", Run: render.Run{Name: "research-1a2b", Repository: "research",
		Commit: strings.Repeat("a", 40), Target: "default", Attempt: 1, PolicyCommit: strings.Repeat("b", 40)}}
	manifests, err := evidence.Rerender(in, tau, policy)
	if err != nil {
		t.Fatal(err)
	}
	b := evidence.NewBundle(evidence.Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1}, "Succeeded")
	b.Add(evidence.PrefixTauFile+"tau.yaml", evidence.MediaYAML, tau)
	for n, d := range policy {
		b.Add(evidence.PrefixPolicy+n, evidence.MediaYAML, d)
	}
	b.Add(evidence.ArtifactManifests, evidence.MediaYAML, manifests)
	if err := b.AddJSON(evidence.ArtifactRenderInputs, in); err != nil {
		t.Fatal(err)
	}
	rec := &evidence.Record{Run: evidence.RunInfo{Namespace: "team-a", Name: "research-1a2b", RepositoryURL: "https://git.example/team-a/research.git",
		Commit: in.Run.Commit}, Inputs: evidence.Inputs{PolicyCommit: in.Run.PolicyCommit, PolicyDigest: "sha256:" + strings.Repeat("e", 64)}}
	if err := b.AddJSON(evidence.ArtifactRecord, rec); err != nil {
		t.Fatal(err)
	}
	sealed, err := b.Seal(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Attestation, err = evidence.Attest(context.Background(), sealed, testSigner); err != nil {
		t.Fatal(err)
	}
	if err := evidence.Write(context.Background(), st, sealed); err != nil {
		t.Fatal(err)
	}
	return st, sealed
}

// testSigner signs the attestations of sealedStore.
var testSigner = func() *evidence.AttestationKey {
	priv, _, err := evidence.NewAttestationKeyPEM()
	if err != nil {
		panic(err)
	}
	k, err := evidence.ParseAttestationKey(priv)
	if err != nil {
		panic(err)
	}
	return k
}()

// publicKeyFile writes k's cosign.pub and returns its path.
func publicKeyFile(t *testing.T, k *evidence.AttestationKey) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(p, k.PublicPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvidenceVerifyChecksTheAttestationAndSaysWhatItChecked: with the
// platform's key (--key, or the page of an API the user trusts), verify
// names the signer's key, what the predicate attests and every subject;
// a signed link alone cannot vouch for the key it serves.
func TestEvidenceVerifyChecksTheAttestationAndSaysWhatItChecked(t *testing.T) {
	st, sealed := sealedStore(t)
	key := publicKeyFile(t, testSigner)
	wants := []string{
		"attestation verified: signed by key " + testSigner.Fingerprint + ", predicate " + evidence.PredicateRunV1,
		"repository https://git.example/team-a/research.git at commit " + strings.Repeat("a", 40),
		"policy commit " + strings.Repeat("b", 40) + ", digest sha256:" + strings.Repeat("e", 64),
		fmt.Sprintf("%d subjects, each digest matched", len(sealed.Manifest.Artifacts)+1),
		sealed.Digest() + "  bundles/team-a/research-1a2b/1.json",
	}
	for _, a := range sealed.Manifest.Artifacts {
		wants = append(wants, "sha256:"+a.SHA256+"  "+a.Name)
	}
	check := func(name, out string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", name, w, out)
			}
		}
	}
	out, _, err := tau(t, "evidence", "verify", st.Root, "--key", key)
	check("store directory with --key", out, err)

	now := time.Now()
	links := &evidence.Links{Key: []byte(strings.Repeat("s", 32)), TTL: time.Hour}
	srv := httptest.NewServer((&evidence.Server{Store: st, Links: links, PublicKey: testSigner, Now: func() time.Time { return now },
		Tokens: teamTokens{"team-a-token-value": "team-a"}}).Handler())
	defer srv.Close()
	page := srv.URL + "/runs/team-a/research-1a2b"
	t.Setenv("TAU_API_URL", srv.URL)
	t.Setenv("TAU_TOKEN", "team-a-token-value")
	out, _, err = tau(t, "evidence", "verify", page)
	check("the page of the API the user named, its key", out, err)

	t.Setenv("TAU_API_URL", "")
	t.Setenv("TAU_TOKEN", "")
	link := page + "?" + links.Query("team-a", "research-1a2b", now.Add(time.Minute))
	out, _, err = tau(t, "evidence", "verify", link)
	if err != nil || strings.Contains(out, "attestation verified") || !strings.Contains(out, "attestation: not checked") || !strings.Contains(out, "--key") {
		t.Errorf("a signed link and no --key: %v\n%s, want the attestation not checked and a hint to pass --key", err, out)
	}
	out, _, err = tau(t, "evidence", "verify", link, "--key", key)
	check("a signed link with --key", out, err)
}

// TestEvidenceVerifyRefusesATamperedAttestation names what failed.
func TestEvidenceVerifyRefusesATamperedAttestation(t *testing.T) {
	st, sealed := sealedStore(t)
	key := publicKeyFile(t, testSigner)
	other, _, _ := evidence.NewAttestationKeyPEM()
	otherKey, err := evidence.ParseAttestationKey(other)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := tau(t, "evidence", "verify", st.Root, "--key", publicKeyFile(t, otherKey))
	if err == nil || !strings.Contains(out, "FAILED") || !strings.Contains(out, "signature does not verify with key "+otherKey.Fingerprint) {
		t.Errorf("another key: %v\n%s", err, out)
	}

	p := filepath.Join(st.Root, filepath.FromSlash(sealed.Manifest.Key.AttestationPath()))
	env, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(env), `"payloadType": "application/vnd.in-toto+json"`, `"payloadType": "application/json"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = tau(t, "evidence", "verify", st.Root, "--key", key)
	if err == nil || !isReported(err) || !strings.Contains(out, `attestation: the attestation's payload type is "application/json"`) {
		t.Errorf("a changed payload type: %v\n%s", err, out)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	out, _, err = tau(t, "evidence", "verify", st.Root, "--key", key)
	if err == nil || !strings.Contains(out, "attestation: the bundle has no attestation") {
		t.Errorf("no attestation: %v\n%s", err, out)
	}
	if _, _, err := tau(t, "evidence", "verify", st.Root, "--key", filepath.Join(st.Root, "bundles", "team-a", "research-1a2b", "1.json")); err == nil || !strings.Contains(err.Error(), "PEM public key") {
		t.Errorf("a --key that is no key: %v", err)
	}
}

func TestEvidenceVerifyChecksAStoreDirectoryAndThePage(t *testing.T) {
	st, sealed := sealedStore(t)
	out, _, err := tau(t, "evidence", "verify", st.Root, "--run", "team-a/research-1a2b")
	if err != nil || !strings.Contains(out, "team-a/research-1a2b#1 "+sealed.Digest()+": verified") {
		t.Fatalf("verify store dir: %v\n%s", err, out)
	}
	srv := httptest.NewServer((&evidence.Server{Store: st, Tokens: teamTokens{"team-a-token-value": "team-a", "team-b-token-value": "team-b"}}).Handler())
	defer srv.Close()
	t.Setenv("TAU_API_URL", srv.URL) // the token's own origin
	t.Setenv("TAU_TOKEN", "team-a-token-value")
	out, _, err = tau(t, "evidence", "verify", srv.URL+"/runs/team-a/research-1a2b", "-o", "json")
	if err != nil || !strings.Contains(out, `"verified": true`) || !strings.Contains(out, `"reproduced": true`) {
		t.Fatalf("verify page: %v\n%s", err, out)
	}

	// Append one byte to a policy file: verify must say which artifact.
	a, _ := sealed.Manifest.Artifact(evidence.PrefixPolicy + "profiles.yaml")
	p := filepath.Join(st.Root, "blobs", "sha256", a.SHA256)
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(data, '#'), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{st.Root, srv.URL + "/runs/team-a/research-1a2b"} {
		out, _, err = tau(t, "evidence", "verify", target)
		if err == nil || !isReported(err) || !strings.Contains(out, "FAILED") || !strings.Contains(out, "policy/profiles.yaml: content does not match") {
			t.Errorf("verify %s after tampering: %v\n%s", target, err, out)
		}
	}
}

func TestEvidenceVerifyRefusesWhatIsNoStore(t *testing.T) {
	if _, _, err := tau(t, "evidence", "verify", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not an evidence store") {
		t.Errorf("verify an empty directory: %v", err)
	}
}

// teamTokens is the runs API's token table: token to namespace.
type teamTokens map[string]string

func (m teamTokens) NamespaceOf(_ context.Context, token string) (string, error) {
	return m[token], nil
}

// TestEvidenceVerifyUsesTheTeamsTokenOrTheSignedLink: the evidence page
// needs a credential; tau sends TAU_TOKEN (the page is on TAU_API_URL's
// origin), or carries the link's signature to every bundle and blob, and
// another team's token reads nothing.
func TestEvidenceVerifyUsesTheTeamsTokenOrTheSignedLink(t *testing.T) {
	st, sealed := sealedStore(t)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	links := &evidence.Links{Key: []byte(strings.Repeat("s", 32)), TTL: time.Hour}
	srv := httptest.NewServer((&evidence.Server{Store: st, Links: links, Now: func() time.Time { return now },
		Tokens: teamTokens{"team-a-token-value": "team-a", "team-b-token-value": "team-b"}}).Handler())
	defer srv.Close()
	page := srv.URL + "/runs/team-a/research-1a2b"
	want := "team-a/research-1a2b#1 " + sealed.Digest() + ": verified"

	t.Setenv("TAU_API_URL", srv.URL)
	t.Setenv("TAU_TOKEN", "team-a-token-value")
	if out, _, err := tau(t, "evidence", "verify", page); err != nil || !strings.Contains(out, want) {
		t.Errorf("with team a's token: %v\n%s", err, out)
	}
	t.Setenv("TAU_TOKEN", "team-b-token-value")
	if out, _, err := tau(t, "evidence", "verify", page); err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(out, "verified") {
		t.Errorf("with team b's token: %v\n%s, want 403", err, out)
	}
	t.Setenv("TAU_TOKEN", "")
	if _, _, err := tau(t, "evidence", "verify", page); err == nil || !strings.Contains(err.Error(), "TAU_TOKEN") {
		t.Errorf("with no token: %v, want a hint to set TAU_TOKEN", err)
	}
	link := page + "?" + links.Query("team-a", "research-1a2b", now.Add(time.Minute))
	if out, _, err := tau(t, "evidence", "verify", link); err != nil || !strings.Contains(out, want) {
		t.Errorf("with the signed link and no token: %v\n%s", err, out)
	}
	expired := page + "?" + links.Query("team-a", "research-1a2b", now.Add(-time.Minute))
	_, _, err := tau(t, "evidence", "verify", expired)
	if err == nil || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "sig=") {
		t.Errorf("with an expired link: %v, want 403 without the signature in the error", err)
	}
}
