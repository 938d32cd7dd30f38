package evidence

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cosignBinary is the real cosign CLI that make test builds
// (TAU_COSIGN); only go test -short runs without it.
func cosignBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real cosign CLI; run without -short (make test builds it)")
	}
	bin := os.Getenv("TAU_COSIGN")
	if bin == "" {
		t.Fatal("TAU_COSIGN is not set: run make test, or make cosign and set TAU_COSIGN to the path it prints")
	}
	return bin
}

// cosignArgs is the offline check docs/evidence.md gives auditors: a plain
// key, no transparency log, no timestamp authority, the envelope as
// --signature.
func cosignArgs(pub, envelope, blob string) []string {
	return []string{"verify-blob-attestation", "--key", pub, "--type", PredicateRunV1, "--signature", envelope,
		"--insecure-ignore-tlog=true", blob}
}

// cosign runs cosign verify-blob-attestation with no network and no home.
func cosign(t *testing.T, bin, dir, pub, envelope, blob string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, cosignArgs(pub, envelope, blob)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "TUF_ROOT=" + filepath.Join(dir, "tuf"), "SIGSTORE_NO_CACHE=1", "PATH=/nonexistent",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY="} // any network use fails
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func otherKey(t *testing.T) []byte {
	k, _ := testAttestationKey(t)
	return k.PublicPEM
}

// TestCosignVerifiesASealedRunsAttestationOffline: the real cosign CLI,
// with only the public key and no network, accepts a sealed run's
// attestation for the bundle's manifest and for each artifact, and
// refuses it once any byte of the bundle or of the statement changes.
func TestCosignVerifiesASealedRunsAttestationOffline(t *testing.T) {
	bin := cosignBinary(t)
	k, _ := testAttestationKey(t)
	s := attestedBundle(t, k)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pub := write("cosign.pub", k.PublicPEM)
	env := write("1.intoto.json", s.Attestation)
	manifest := write("1.json", s.Raw)
	rec, _ := s.Manifest.Artifact(ArtifactRecord)
	record := write("record.json", s.Blobs[rec.SHA256])

	for name, blob := range map[string]string{"the manifest": manifest, "an artifact (record.json)": record} {
		if out, err := cosign(t, bin, dir, pub, env, blob); err != nil || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign refused %s: %v\n%s", name, err, out)
		}
	}

	// Each refusal for its own reason: a blob the statement does not name,
	// a statement or envelope that is not what was signed, another key.
	changed := append([]byte(nil), s.Raw...)
	changed[len(changed)/2] ^= 1
	refusals := map[string]struct{ pub, env, blob, want string }{
		"a byte of the manifest": {pub, env, write("changed.json", changed), "no matching subject digest found"},
		"another key":            {write("other.pub", otherKey(t)), env, manifest, "accepted signatures do not match threshold"},
		"a subject's digest":     {pub, "", manifest, "accepted signatures do not match threshold"},
		"a predicate field":      {pub, "", manifest, "accepted signatures do not match threshold"},
		"the payload type":       {pub, "", manifest, "invalid payloadType application/json"},
		"the signature":          {pub, "", manifest, "accepted signatures do not match threshold"},
	}
	for name, c := range refusals {
		t.Run(name, func(t *testing.T) {
			if c.env == "" {
				c.env = write(strings.ReplaceAll(name, " ", "-")+".intoto.json", editEnvelope(t, s.Attestation, tampering[name]))
			}
			out, err := cosign(t, bin, dir, c.pub, c.env, c.blob)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("cosign: %v, want a refusal saying %q:\n%s", err, c.want, out)
			}
		})
	}
}
