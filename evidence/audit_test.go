package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

var auditNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func decision(run, key string) AuditEntry {
	return AuditEntry{Run: run, RunUID: "uid-" + run, Key: key, Decision: strings.Split(key, "#")[0], At: auditNow, Message: key + " of " + run}
}

func newAuditLog(s AuditStore) *AuditLog {
	return &AuditLog{Store: s, Clock: clocktesting.NewFakePassiveClock(auditNow)}
}

// readChain reads a namespace's whole log back as stored.
func readChain(t *testing.T, s AuditStore, ns string) []StoredAuditEntry {
	t.Helper()
	ctx := context.Background()
	seqs, err := s.AuditSeqs(ctx, ns, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []StoredAuditEntry
	for _, seq := range seqs {
		raw, err := s.AuditEntry(ctx, ns, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, StoredAuditEntry{Seq: seq, Raw: string(raw)})
	}
	return out
}

func keysOf(t *testing.T, chain []StoredAuditEntry) []string {
	t.Helper()
	var keys []string
	for _, st := range chain {
		var e AuditEntry
		if err := json.Unmarshal([]byte(st.Raw), &e); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, e.Run+"/"+e.Key)
	}
	return keys
}

// testAppendOnceAndChain: each decision is written once, in order, chained
// to the one before; a restarted writer (a new AuditLog on the same store)
// writes nothing it finds there.
func testAppendOnceAndChain(t *testing.T, s AuditStore) {
	ctx := context.Background()
	first := []AuditEntry{decision("a", "requested"), decision("a", "submitted#1"), decision("b", "requested")}
	if n, err := newAuditLog(s).Append(ctx, "team-a", first); err != nil || n != 3 {
		t.Fatalf("first append wrote %d, %v; want 3", n, err)
	}
	log := newAuditLog(s) // a restart: the index is read from the store
	again := append(first, decision("a", "admitted#1"))
	if n, err := log.Append(ctx, "team-a", again); err != nil || n != 1 {
		t.Fatalf("appending the same decisions and one more wrote %d, %v; want 1", n, err)
	}
	if n, err := log.Append(ctx, "team-a", again); err != nil || n != 0 {
		t.Fatalf("a repeated append wrote %d, %v; want 0", n, err)
	}
	chain := readChain(t, s, "team-a")
	want := []string{"a/requested", "a/submitted#1", "b/requested", "a/admitted#1"}
	if diff := cmp.Diff(want, keysOf(t, chain)); diff != "" {
		t.Errorf("the log (-want +got):\n%s", diff)
	}
	if breaks := VerifyAuditChain(chain); len(breaks) != 0 {
		t.Errorf("an untouched log reports %+v", breaks)
	}
	var second AuditEntry
	_ = json.Unmarshal([]byte(chain[1].Raw), &second)
	if second.Seq != 2 || second.Prev != AuditDigest([]byte(chain[0].Raw)) || second.Namespace != "team-a" {
		t.Errorf("entry 2 = seq %d prev %s ns %s; want 2, entry 1's digest, team-a", second.Seq, second.Prev, second.Namespace)
	}
	if seqs, _ := s.AuditSeqs(ctx, "team-b", 0, 0); len(seqs) != 0 {
		t.Errorf("another namespace's log holds %v", seqs)
	}
	if seqs, _ := s.AuditSeqs(ctx, "team-a", 1, 2); !cmp.Equal(seqs, []int64{2, 3}) {
		t.Errorf("a page after 1 of 2 = %v, want [2 3]", seqs)
	}
}

func TestTheFileStoresAuditLogWritesEachDecisionOnceInAChain(t *testing.T) {
	s, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testAppendOnceAndChain(t, s)
}

func TestTheS3StoresAuditLogWritesEachDecisionOnceInAChain(t *testing.T) {
	_, o := s3Server(t)
	s, err := NewS3Store(o)
	if err != nil {
		t.Fatal(err)
	}
	testAppendOnceAndChain(t, s)
	err = s.CreateAuditEntry(context.Background(), "team-a", 1, []byte(`{}`))
	if !isErrExists(err) {
		t.Errorf("a second write of entry 1 to the bucket: %v, want ErrExists", err)
	}
}

func isErrExists(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrExists.Error())
}

// testConcurrentWriters: writers that each hold their own index (two
// replicas, one just elected) append at once; no number is written twice,
// no decision is lost or doubled, and the chain holds.
func testConcurrentWriters(t *testing.T, s AuditStore) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		log := newAuditLog(s)
		wg.Go(func() {
			for i := range 5 {
				shared := decision("shared", fmt.Sprintf("step#%d", i)) // every writer sees it
				own := decision(fmt.Sprintf("w%d", w), fmt.Sprintf("step#%d", i))
				// Losing maxAuditConflicts races in a row is an error the
				// controller retries (its reconcile comes again): so does
				// each writer here. Under make test's load one writer of
				// four did lose 8 in a row.
				var err error
				for range 10 {
					if _, err = log.Append(ctx, "team-a", []AuditEntry{shared, own}); err == nil || !strings.Contains(err.Error(), "trying again later") {
						break
					}
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	chain := readChain(t, s, "team-a")
	seen := map[string]int{}
	for _, k := range keysOf(t, chain) {
		seen[k]++
	}
	if len(chain) != 25 || len(seen) != 25 {
		t.Errorf("%d entries, %d decisions; want 25 of each (5 shared, 20 own): %v", len(chain), len(seen), seen)
	}
	if breaks := VerifyAuditChain(chain); len(breaks) != 0 {
		t.Errorf("concurrent writers broke the chain: %+v", breaks)
	}
}

func TestConcurrentWritersOnTheFileStoreNeverShareANumber(t *testing.T) {
	s, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testConcurrentWriters(t, s)
}

func TestConcurrentWritersOnS3NeverShareANumber(t *testing.T) {
	_, o := s3Server(t)
	s, err := NewS3Store(o)
	if err != nil {
		t.Fatal(err)
	}
	testConcurrentWriters(t, s)
}

// TestABrokenChainSaysWhereAndWhat plays the one who edits the store:
// each tampering is reported at its entry, with what was found and what
// was expected.
func TestABrokenChainSaysWhereAndWhat(t *testing.T) {
	type tamper func(t *testing.T, root string, chain []StoredAuditEntry)
	path := func(root string, seq int64) string {
		return filepath.Join(root, "audit", "team-a", fmt.Sprintf("%012d.json", seq))
	}
	write := func(t *testing.T, p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		tamper tamper
		want   func(chain []StoredAuditEntry) []ChainBreak
	}{
		"an entry removed from the middle": {
			tamper: func(t *testing.T, root string, _ []StoredAuditEntry) { _ = os.Remove(path(root, 3)) },
			want: func([]StoredAuditEntry) []ChainBreak {
				return []ChainBreak{{Seq: 3, Kind: BreakMissing, Message: "entry 3 is missing: entry 4 follows entry 2"}}
			},
		},
		"the first entries removed": {
			tamper: func(t *testing.T, root string, _ []StoredAuditEntry) {
				_ = os.Remove(path(root, 1))
				_ = os.Remove(path(root, 2))
			},
			want: func([]StoredAuditEntry) []ChainBreak {
				return []ChainBreak{{Seq: 1, Kind: BreakMissing, Message: "entries 1 to 2 are missing: the log starts at entry 3"}}
			},
		},
		"an entry's reason rewritten": {
			tamper: func(t *testing.T, root string, chain []StoredAuditEntry) {
				write(t, path(root, 2), strings.Replace(chain[1].Raw, "submitted#1 of a", "nothing happened", 1))
			},
			want: func(chain []StoredAuditEntry) []ChainBreak {
				edited := AuditDigest([]byte(strings.Replace(chain[1].Raw, "submitted#1 of a", "nothing happened", 1)))
				return []ChainBreak{{Seq: 2, Kind: BreakChanged, Message: "entry 2 was changed after it was written: its digest is " +
					edited + ", entry 3 says " + AuditDigest([]byte(chain[1].Raw))}}
			},
		},
		"an entry replaced by garbage": {
			tamper: func(t *testing.T, root string, _ []StoredAuditEntry) { write(t, path(root, 4), "gone") },
			want: func([]StoredAuditEntry) []ChainBreak {
				return []ChainBreak{{Seq: 4, Kind: BreakChanged,
					Message: "entry 4 was changed after it was written: it no longer reads as an audit entry (invalid character 'g' looking for beginning of value)"}}
			},
		},
		"two entries swapped": {
			tamper: func(t *testing.T, root string, chain []StoredAuditEntry) {
				write(t, path(root, 2), chain[2].Raw)
				write(t, path(root, 3), chain[1].Raw)
			},
			want: func([]StoredAuditEntry) []ChainBreak {
				return []ChainBreak{
					{Seq: 2, Kind: BreakReordered, Message: "entry 2 is out of place: what is stored as entry 2 says it is entry 3"},
					{Seq: 3, Kind: BreakReordered, Message: "entry 3 is out of place: what is stored as entry 3 says it is entry 2"},
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			s, err := NewFileStore(root)
			if err != nil {
				t.Fatal(err)
			}
			entries := []AuditEntry{decision("a", "requested"), decision("a", "submitted#1"), decision("a", "admitted#1"),
				decision("a", "ended#1"), decision("a", "outcome")}
			if _, err := newAuditLog(s).Append(context.Background(), "team-a", entries); err != nil {
				t.Fatal(err)
			}
			chain := readChain(t, s, "team-a")
			tc.tamper(t, root, chain)
			if diff := cmp.Diff(tc.want(chain), VerifyAuditChain(readChain(t, s, "team-a"))); diff != "" {
				t.Errorf("breaks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAWriterGoesOnAfterABrokenEntry: a log someone broke still takes new
// decisions, after its last entry, and the break stays reported.
func TestAWriterGoesOnAfterABrokenEntry(t *testing.T) {
	root := t.TempDir()
	s, _ := NewFileStore(root)
	ctx := context.Background()
	if _, err := newAuditLog(s).Append(ctx, "team-a", []AuditEntry{decision("a", "requested"), decision("a", "submitted#1")}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "audit", "team-a", "000000000002.json"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := newAuditLog(s).Append(ctx, "team-a", []AuditEntry{decision("a", "admitted#1")}); err != nil || n != 1 {
		t.Fatalf("append after a broken entry wrote %d, %v", n, err)
	}
	breaks := VerifyAuditChain(readChain(t, s, "team-a"))
	if len(breaks) != 1 || breaks[0].Seq != 2 {
		t.Errorf("breaks = %+v, want entry 2 only", breaks)
	}
}
