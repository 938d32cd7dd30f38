package evidence

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taugrid/taugrid/render"
)

var sealTime = time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)

// exampleBundle assembles the bundle of attempt 1 of the example research
// repo's default target under the example platform policy.
func exampleBundle(t testing.TB, key Key, log string) *Bundle {
	t.Helper()
	return exampleBundleWith(t, key, log, nil)
}

// exampleBundleWith is exampleBundle with its record changed by change.
func exampleBundleWith(t testing.TB, key Key, log string, change func(*Record)) *Bundle {
	t.Helper()
	tau := readFile(t, "../examples/research/tau.yaml")
	policy := map[string][]byte{}
	for _, name := range []string{"tenants.yaml", "profiles.yaml", "images.yaml", "priorities.yaml", "limits.yaml", "security.yaml"} {
		policy[name] = readFile(t, filepath.Join("../examples/platform", name))
	}
	in := RenderInputs{TauFile: "tau.yaml", Tenant: "team-a", Run: render.Run{Name: key.Run, Repository: "research",
		Commit: strings.Repeat("a", 40), Target: "default", Attempt: key.Attempt, PolicyCommit: strings.Repeat("b", 40),
		Source: &render.SourceArchive{URL: "http://tau/source/x.tar.gz", SHA256: strings.Repeat("c", 64), Image: "tau:v1"}}}
	manifests, err := Rerender(in, tau, policy)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBundle(key, "Succeeded")
	b.Add(PrefixTauFile+"tau.yaml", MediaYAML, tau)
	for name, data := range policy {
		b.Add(PrefixPolicy+name, MediaYAML, data)
	}
	b.Add(ArtifactManifests, MediaYAML, manifests)
	if err := b.AddJSON(ArtifactRenderInputs, in); err != nil {
		t.Fatal(err)
	}
	rec := &Record{Run: RunInfo{Namespace: key.Namespace, Name: key.Run, Repository: "research", Commit: in.Run.Commit, Phase: "Succeeded"},
		Attempts: []AttemptInfo{{Number: key.Attempt, Workload: render.WorkloadName(key.Run, key.Attempt)}},
		Logs:     []LogTail{{Pod: key.Run + "-1-abcde", Container: "main", Artifact: PrefixLogs + key.Run + "-1-abcde/main.log", Bytes: len(log)}}}
	if change != nil {
		change(rec)
	}
	if err := b.AddJSON(ArtifactRecord, rec); err != nil {
		t.Fatal(err)
	}
	b.Add(rec.Logs[0].Artifact, MediaText, []byte(log))
	return b
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func sealInto(t testing.TB, s Store, b *Bundle) *Sealed {
	t.Helper()
	sealed, err := b.Seal(sealTime)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(context.Background(), s, sealed); err != nil {
		t.Fatal(err)
	}
	return sealed
}

func TestASealedBundleVerifiesAndReproducesItsManifests(t *testing.T) {
	st, _ := NewFileStore(t.TempDir())
	key := Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1}
	sealed := sealInto(t, st, exampleBundle(t, key, "epoch 1 loss 0.3\n"))
	raw, err := st.Manifest(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	r := Verify(context.Background(), raw, st)
	if !r.OK() || !r.Reproduced || r.Checked != len(sealed.Manifest.Artifacts) {
		t.Fatalf("verify = %+v, want every artifact checked and the manifests reproduced", r)
	}
	if r.Digest != sealed.Digest() {
		t.Errorf("digest = %s, want %s", r.Digest, sealed.Digest())
	}
}

func TestTamperingWithAnyArtifactIsDetected(t *testing.T) {
	key := Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1}
	probe := exampleBundle(t, key, "epoch 1 loss 0.3\n")
	sealed, _ := probe.Seal(sealTime)
	for _, a := range sealed.Manifest.Artifacts {
		t.Run(a.Name, func(t *testing.T) {
			st, _ := NewFileStore(t.TempDir())
			sealInto(t, st, exampleBundle(t, key, "epoch 1 loss 0.3\n"))
			p := filepath.Join(st.Root, "blobs", "sha256", a.SHA256)
			data := readFile(t, p)
			data = append(data[:len(data)-1], data[len(data)-1]^0x20)
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			raw, _ := st.Manifest(context.Background(), key)
			r := Verify(context.Background(), raw, st)
			if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), a.Name) {
				t.Errorf("tampered %s: verify = %+v, want a problem naming it", a.Name, r)
			}
		})
	}
	t.Run("a manifest that names a changed manifests.yaml consistently still fails to reproduce", func(t *testing.T) {
		st, _ := NewFileStore(t.TempDir())
		b := exampleBundle(t, key, "x\n")
		m := string(b.blobs[ArtifactManifests])
		b.Add(ArtifactManifests, MediaYAML, []byte(strings.Replace(m, "python:3.12-slim", "evil:latest", 1)))
		sealed := sealInto(t, st, b)
		r := Verify(context.Background(), sealed.Raw, st)
		if r.OK() || r.Reproduced {
			t.Errorf("verify = %+v, want a failed reproduction", r)
		}
	})
}

func TestAStoreRefusesToOverwriteASealedBundle(t *testing.T) {
	st, _ := NewFileStore(t.TempDir())
	testSealedIsImmutable(t, st)
}

func testSealedIsImmutable(t *testing.T, st Store) {
	t.Helper()
	ctx := context.Background()
	key := Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1}
	first := sealInto(t, st, exampleBundle(t, key, "one\n"))
	if err := Write(ctx, st, first); err != nil {
		t.Errorf("writing the same bundle again: %v, want nil", err)
	}
	second, _ := exampleBundle(t, key, "two\n").Seal(sealTime)
	if err := Write(ctx, st, second); !errors.Is(err, ErrSealed) {
		t.Errorf("overwriting with different content: %v, want ErrSealed", err)
	}
	raw, _ := st.Manifest(ctx, key)
	if string(raw) != string(first.Raw) {
		t.Error("the sealed manifest changed")
	}
	if has, err := Has(ctx, st, Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 2}); err != nil || has {
		t.Errorf("Has(attempt 2) = %v, %v; want false, nil", has, err)
	}
}

func TestRetentionPrunesOldBundlesAndTheirUnsharedBlobs(t *testing.T) {
	ctx := context.Background()
	st, _ := NewFileStore(t.TempDir())
	now := time.Now()
	for i, age := range []time.Duration{40 * 24 * time.Hour, 10 * 24 * time.Hour, time.Hour} {
		key := Key{Namespace: "team-a", Run: "run-" + string(rune('a'+i)), Attempt: 1}
		sealInto(t, st, exampleBundle(t, key, strings.Repeat("log of "+key.Run+"\n", 3)))
		old := now.Add(-age)
		for _, p := range []string{key.Path()} {
			if err := os.Chtimes(filepath.Join(st.Root, p), old, old); err != nil {
				t.Fatal(err)
			}
		}
		entries, _ := st.Blobs(ctx)
		for _, e := range entries { // make every blob old enough to sweep
			_ = os.Chtimes(filepath.Join(st.Root, e.Path), now.Add(-2*blobGrace), now.Add(-2*blobGrace))
		}
	}
	r, err := ParseRetention("30d,last=1")
	if err != nil || r.MaxAge != 30*24*time.Hour || r.KeepLast != 1 {
		t.Fatalf("ParseRetention = %+v, %v", r, err)
	}
	bundles, blobs, err := Prune(ctx, st, Retention{MaxAge: r.MaxAge}, now)
	if err != nil || bundles != 1 || blobs != 4 { // run-a's record, log, inputs and manifests; tau file and policy are shared
		t.Errorf("prune 30d = %d bundles, %d blobs, %v; want 1, 4", bundles, blobs, err)
	}
	if bundles, _, err = Prune(ctx, st, Retention{KeepLast: 1}, now); err != nil || bundles != 1 {
		t.Errorf("prune last=1 = %d bundles, %v; want 1", bundles, err)
	}
	left, _ := st.Manifests(ctx, "", "")
	if len(left) != 1 || !strings.Contains(left[0].Path, "run-c") {
		t.Errorf("left %+v, want only run-c", left)
	}
	raw, _ := st.Manifest(ctx, Key{Namespace: "team-a", Run: "run-c", Attempt: 1})
	if r := Verify(ctx, raw, st); !r.OK() {
		t.Errorf("the kept bundle no longer verifies: %v", r.Problems)
	}
	for _, bad := range []string{"30x", "last=0", "-1h", "last=many"} {
		if _, err := ParseRetention(bad); err == nil {
			t.Errorf("ParseRetention(%q) accepted it", bad)
		}
	}
}

func isErrNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
