package main

import (
	"context"
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
	if err := b.AddJSON(evidence.ArtifactRecord, &evidence.Record{}); err != nil {
		t.Fatal(err)
	}
	sealed, err := b.Seal(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.Write(context.Background(), st, sealed); err != nil {
		t.Fatal(err)
	}
	return st, sealed
}

func TestEvidenceVerifyChecksAStoreDirectoryAndThePage(t *testing.T) {
	st, sealed := sealedStore(t)
	out, _, err := tau(t, "evidence", "verify", st.Root, "--run", "team-a/research-1a2b")
	if err != nil || !strings.Contains(out, "team-a/research-1a2b#1 "+sealed.Digest()+": verified") {
		t.Fatalf("verify store dir: %v\n%s", err, out)
	}
	srv := httptest.NewServer((&evidence.Server{Store: st}).Handler())
	defer srv.Close()
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
