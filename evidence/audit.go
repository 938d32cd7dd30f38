package evidence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// The audit log. Each tenant (namespace) has one log of every decision
// about its runs, in the order they were recorded: entry n carries its
// sequence number and the sha256 of entry n-1's stored bytes, so an entry
// removed, changed or moved breaks the chain at that place
// (VerifyAuditChain). Each entry is its own object, written once:
//
//	audit/<namespace>/<seq, 12 digits>.json
//
// Object stores have no append; writing each entry create-only is what
// keeps two writers from both writing entry n: the second is refused
// (ErrExists), reads what the first wrote and writes after it.

// AuditSchemaVersion is the version of AuditEntry's JSON.
const AuditSchemaVersion = 1

// ErrExists: an audit entry is already stored under that sequence number.
var ErrExists = errors.New("an audit entry is already stored under this number")

// AuditEntry is one decision about a run, as it was observed on the run's
// status and its Kueue Workload.
type AuditEntry struct {
	SchemaVersion int `json:"schema_version"`
	// Seq numbers the tenant's entries from 1, without gaps.
	Seq int64 `json:"seq"`
	// Prev is the hex sha256 of entry Seq-1's stored bytes; empty for 1.
	Prev      string `json:"prev"`
	Namespace string `json:"namespace"`
	Run       string `json:"run"`
	RunUID    string `json:"run_uid"`
	// Key names the decision within the run, stably (requested,
	// admitted#1, check#1/policy=Ready, ...): a decision already in the
	// log is never written again.
	Key string `json:"key"`
	// Decision is what was decided: requested, signed, rendered,
	// submitted, admitted, check, rejected, preempted, ended, resumed,
	// retried, cancelled, outcome.
	Decision string `json:"decision"`
	// At is when it happened, as the run or its Workload recorded it, or
	// when the controller saw it where they record no time.
	At time.Time `json:"at"`
	// By is who or what decided: a requester, a signer, a ClusterQueue,
	// an admission check, the retry policy.
	By string `json:"by,omitempty"`
	// Attempt is the attempt the decision is about, 0 for the run.
	Attempt int `json:"attempt,omitempty"`
	// Message says why, in one line.
	Message string `json:"message,omitempty"`
	// Facts are what the decision rested on: the commit, the policy
	// commit, the digests, the ClusterQueue.
	Facts map[string]string `json:"facts,omitempty"`
	// Recorded is when the controller wrote the entry.
	Recorded time.Time `json:"recorded"`
}

// AuditStore keeps audit entries, each written once.
type AuditStore interface {
	// CreateAuditEntry stores raw as entry seq of namespace's log, unless
	// one is stored there already (ErrExists).
	CreateAuditEntry(ctx context.Context, namespace string, seq int64, raw []byte) error
	// AuditEntry reads entry seq of namespace's log.
	AuditEntry(ctx context.Context, namespace string, seq int64) ([]byte, error)
	// AuditSeqs lists the stored entries of namespace's log after seq
	// after, in order, at most limit of them (0: all).
	AuditSeqs(ctx context.Context, namespace string, after int64, limit int) ([]int64, error)
}

var namespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// auditPath is where entry seq of namespace's log is stored.
func auditPath(namespace string, seq int64) (string, error) {
	if !namespacePattern.MatchString(namespace) || seq < 1 {
		return "", fmt.Errorf("no audit entry %d of namespace %q", seq, namespace)
	}
	return fmt.Sprintf("audit/%s/%012d.json", namespace, seq), nil
}

// auditDir is the folder of namespace's log, with a trailing slash.
func auditDir(namespace string) (string, error) {
	if !namespacePattern.MatchString(namespace) {
		return "", fmt.Errorf("no audit log of namespace %q", namespace)
	}
	return "audit/" + namespace + "/", nil
}

// auditSeqOf is the sequence number of a stored entry's name.
func auditSeqOf(name string) (int64, bool) {
	num, ok := strings.CutSuffix(name, ".json")
	if !ok || len(num) != 12 {
		return 0, false
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	return seq, err == nil && seq > 0
}

// AuditDigest is the hex sha256 of an entry's stored bytes: what the next
// entry's Prev says.
func AuditDigest(raw []byte) string {
	d := sha256.Sum256(raw)
	return hex.EncodeToString(d[:])
}

// AuditLog appends decisions to the tenants' logs, each at most once. It
// keeps, per namespace, the keys the log holds and where it ends, read
// from the store the first time the namespace is written and again when
// another writer got there first.
type AuditLog struct {
	Store AuditStore
	Clock clock.PassiveClock

	mu      sync.Mutex
	tenants map[string]*auditTenant
}

// auditTenant is what the log knows of one namespace's log.
type auditTenant struct {
	mu   sync.Mutex // one append at a time per namespace
	next int64      // 0: not read yet
	last string     // digest of entry next-1
	keys map[string]bool
}

// maxAuditConflicts bounds how often one append re-reads the log after
// another writer took the number it meant to write.
const maxAuditConflicts = 8

func (l *AuditLog) tenant(namespace string) *auditTenant {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tenants == nil {
		l.tenants = map[string]*auditTenant{}
	}
	t := l.tenants[namespace]
	if t == nil {
		t = &auditTenant{keys: map[string]bool{}}
		l.tenants[namespace] = t
	}
	return t
}

// Append writes, in order, those of entries (all of namespace) whose
// run and key the log does not hold yet, and says how many it wrote.
// Seq, Prev and Recorded are set here.
func (l *AuditLog) Append(ctx context.Context, namespace string, entries []AuditEntry) (int, error) {
	t := l.tenant(namespace)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next == 0 {
		if err := t.catchUp(ctx, l.Store, namespace); err != nil {
			return 0, err
		}
	}
	written := 0
	for _, e := range entries {
		if t.keys[entryKey(e.RunUID, e.Key)] {
			continue
		}
		ok, err := l.appendOne(ctx, t, namespace, e)
		if err != nil {
			return written, err
		}
		if ok {
			written++
		}
	}
	return written, nil
}

// appendOne writes e after the last entry, re-reading the log when
// another writer took that number; false when the log turned out to hold
// e already.
func (l *AuditLog) appendOne(ctx context.Context, t *auditTenant, namespace string, e AuditEntry) (bool, error) {
	for range maxAuditConflicts {
		e.SchemaVersion, e.Namespace, e.Seq, e.Prev = AuditSchemaVersion, namespace, t.next, t.last
		e.Recorded = l.Clock.Now().UTC()
		if e.At.IsZero() {
			e.At = e.Recorded // the run records no time for it: when it was seen
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return false, err
		}
		err = l.Store.CreateAuditEntry(ctx, namespace, e.Seq, raw)
		if err == nil {
			t.add(e, raw)
			return true, nil
		}
		if !errors.Is(err, ErrExists) {
			return false, fmt.Errorf("writing audit entry %d of %s: %w", e.Seq, namespace, err)
		}
		if err := t.catchUp(ctx, l.Store, namespace); err != nil {
			return false, err
		}
		if t.keys[entryKey(e.RunUID, e.Key)] {
			return false, nil
		}
	}
	return false, fmt.Errorf("audit log of %s: other writers took %d numbers in a row; trying again later", namespace, maxAuditConflicts)
}

// catchUp reads the entries stored after the last one known.
func (t *auditTenant) catchUp(ctx context.Context, s AuditStore, namespace string) error {
	seqs, err := s.AuditSeqs(ctx, namespace, max(t.next-1, 0), 0)
	if err != nil {
		return fmt.Errorf("reading the audit log of %s: %w", namespace, err)
	}
	if t.next == 0 {
		t.next = 1
	}
	for _, seq := range seqs {
		raw, err := s.AuditEntry(ctx, namespace, seq)
		if err != nil {
			return fmt.Errorf("reading audit entry %d of %s: %w", seq, namespace, err)
		}
		var e AuditEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			// A broken entry is VerifyAuditChain's to report; the log
			// goes on after it.
			e = AuditEntry{}
		}
		e.Seq = seq
		t.add(e, raw)
	}
	return nil
}

func (t *auditTenant) add(e AuditEntry, raw []byte) {
	if e.Key != "" {
		t.keys[entryKey(e.RunUID, e.Key)] = true
	}
	if e.Seq >= t.next {
		t.next, t.last = e.Seq+1, AuditDigest(raw)
	}
}

func entryKey(runUID, key string) string { return runUID + "\x00" + key }
