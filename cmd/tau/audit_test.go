package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// auditFixture is a runs API whose team-a log holds two runs' decisions;
// root is the evidence store's directory, for the tests that tamper.
func auditFixture(t *testing.T) (url, root string) {
	t.Helper()
	freshUser(t)
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{taugridv1.APITokenKey: []byte(teamAToken), taugridv1.APINamespaceKey: []byte("team-a")}},
		&taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "research-1a2b", Namespace: "team-a"}},
	).Build()
	root = t.TempDir()
	store, err := evidence.NewFileStore(root)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 1, 11, 0, 0, 0, time.UTC)
	log := &evidence.AuditLog{Store: store, Clock: clocktesting.NewFakePassiveClock(at.Add(time.Hour))}
	entry := func(run, key, decision, by, msg string, min int) evidence.AuditEntry {
		return evidence.AuditEntry{Run: run, RunUID: "uid-" + run, Key: key, Decision: decision, By: by, Message: msg,
			At: at.Add(time.Duration(min) * time.Minute)}
	}
	if _, err := log.Append(context.Background(), "team-a", []evidence.AuditEntry{
		entry("research-1a2b", "requested", "requested", "alice@example.com", "requested by alice@example.com: RunRef refs/tau/runs/r-1 at commit 0123456789ab, target default", 0),
		entry("research-9z9z", "requested", "requested", "bob@example.com", "requested by bob@example.com", 1),
		entry("research-1a2b", "admitted#1", "admitted", "ClusterQueue gpu", "attempt 1 admitted by ClusterQueue gpu", 2),
		entry("research-1a2b", "outcome", "outcome", "", "succeeded: finished in 17m", 30),
	}); err != nil {
		t.Fatal(err)
	}
	api := &server.RunsAPI{Client: c, APIReader: c, Audit: store,
		Tokens: &server.Tokens{Reader: c, Namespace: "tau-system", Clock: clocktesting.NewFakePassiveClock(at)}}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	t.Setenv("TAU_TOKEN", teamAToken)
	t.Setenv("TAU_API_URL", srv.URL)
	return srv.URL, root
}

func TestTauAuditPrintsARunsDecisionsInOrder(t *testing.T) {
	auditFixture(t)
	out, stderr, err := tau(t, "audit", "research-1a2b")
	if err != nil {
		t.Fatalf("tau audit: %v\n%s", err, stderr)
	}
	want := []string{
		"#  WHEN (UTC)           RUN            DECISION   BY                 WHY",
		"1  2026-06-01 11:00:00  research-1a2b  requested  alice@example.com  requested by alice@example.com: RunRef refs/tau/runs/r-1 at commit 0123456789ab, target default",
		"3  2026-06-01 11:02:00  research-1a2b  admitted   ClusterQueue gpu   attempt 1 admitted by ClusterQueue gpu",
		"4  2026-06-01 11:30:00  research-1a2b  outcome    -                  succeeded: finished in 17m",
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if stderr != "" {
		t.Errorf("an intact log warns: %s", stderr)
	}
	if _, stderr, err := tau(t, "audit", "--verify"); err != nil || !strings.Contains(stderr, "holds together: 4 entries") {
		t.Errorf("tau audit --verify of an intact log: %v\n%s", err, stderr)
	}
}

// TestTauAuditJSONExportsTheEntriesAsStored: one entry a line, the bytes
// the chain's digests are of, so an auditor can verify the export.
func TestTauAuditJSONExportsTheEntriesAsStored(t *testing.T) {
	auditFixture(t)
	out, _, err := tau(t, "audit", "--json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var chain []evidence.StoredAuditEntry
	for i, l := range lines {
		var e evidence.AuditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Seq != int64(i+1) {
			t.Fatalf("line %d = %s (%v)", i+1, l, err)
		}
		chain = append(chain, evidence.StoredAuditEntry{Seq: e.Seq, Raw: l})
	}
	if len(chain) != 4 {
		t.Fatalf("exported %d entries, want 4", len(chain))
	}
	if breaks := evidence.VerifyAuditChain(chain); len(breaks) != 0 {
		t.Errorf("the export does not verify offline: %+v", breaks)
	}
}

// TestTauAuditSaysWhereTheLogWasTamperedWith plays someone with write
// access to the evidence store.
func TestTauAuditSaysWhereTheLogWasTamperedWith(t *testing.T) {
	_, root := auditFixture(t)
	entry := func(seq string) string { return filepath.Join(root, "audit", "team-a", "00000000000"+seq+".json") }
	raw, err := os.ReadFile(entry("3"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), "ClusterQueue gpu", "ClusterQueue vip", 2)
	if err := os.WriteFile(entry("3"), []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := tau(t, "audit", "research-1a2b")
	if err != nil {
		t.Fatalf("tau audit without --verify: %v", err)
	}
	wantMsg := "entry 3 was changed after it was written: its digest is " + evidence.AuditDigest([]byte(edited)) +
		", entry 4 says " + evidence.AuditDigest(raw)
	if !strings.Contains(stderr, "The audit log of team-a is BROKEN") || !strings.Contains(stderr, wantMsg) {
		t.Errorf("stderr:\n%s\nwant the break: %s", stderr, wantMsg)
	}
	if !strings.Contains(out, "ClusterQueue vip") {
		t.Errorf("the entry as it now reads is still shown:\n%s", out)
	}
	if err := os.Remove(entry("2")); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = tau(t, "audit", "--verify")
	if err == nil || exitCode(err) == exitOK {
		t.Errorf("tau audit --verify of a broken log: %v, want a non-zero exit", err)
	}
	if !strings.Contains(stderr, "entry 2 is missing: entry 3 follows entry 1") {
		t.Errorf("stderr:\n%s\nwant the removed entry named", stderr)
	}
}
