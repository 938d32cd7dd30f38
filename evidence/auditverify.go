package evidence

import (
	"encoding/json"
	"fmt"
	"slices"
)

// StoredAuditEntry is an audit entry as read back: its number from its
// name in the store, its bytes as stored.
type StoredAuditEntry struct {
	Seq int64  `json:"seq"`
	Raw string `json:"raw"`
}

// How a chain breaks.
const (
	BreakMissing   = "missing"   // no entry under a number before the last
	BreakChanged   = "changed"   // an entry's bytes are not those the next entry was chained to
	BreakReordered = "reordered" // an entry stored under another entry's number
)

// ChainBreak is one place where a tenant's audit log does not hold
// together.
type ChainBreak struct {
	// Seq is the entry that is missing, changed or out of place.
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
	// Message says what was found and what was expected, in words.
	Message string `json:"message"`
}

// VerifyAuditChain walks a tenant's whole log, from entry 1, and reports
// every gap, changed entry and entry out of place. An entry is changed
// when its digest is not what the next entry's prev says, so a change to
// the newest entry shows once another follows it.
func VerifyAuditChain(entries []StoredAuditEntry) []ChainBreak {
	entries = slices.SortedFunc(slices.Values(entries), func(a, b StoredAuditEntry) int { return int(a.Seq - b.Seq) })
	var breaks []ChainBreak
	want := int64(1)
	prevDigest, prevSeq, prevUsable := "", int64(0), true // entry 1 follows nothing
	for _, st := range entries {
		if st.Seq > want {
			breaks = append(breaks, missing(want, st.Seq))
			prevUsable = false
		}
		want = st.Seq + 1
		var e AuditEntry
		switch err := json.Unmarshal([]byte(st.Raw), &e); {
		case err != nil:
			breaks = append(breaks, ChainBreak{Seq: st.Seq, Kind: BreakChanged,
				Message: fmt.Sprintf("entry %d was changed after it was written: it no longer reads as an audit entry (%v)", st.Seq, err)})
		case e.Seq != st.Seq:
			breaks = append(breaks, ChainBreak{Seq: st.Seq, Kind: BreakReordered,
				Message: fmt.Sprintf("entry %d is out of place: what is stored as entry %d says it is entry %d", st.Seq, st.Seq, e.Seq)})
		case prevUsable && e.Prev != prevDigest:
			breaks = append(breaks, changed(prevSeq, prevDigest, st.Seq, e.Prev))
		}
		// An entry out of place or unreadable is reported for itself; the
		// link from it to the next one says nothing more.
		prevUsable = e.Seq == st.Seq
		prevDigest, prevSeq = AuditDigest([]byte(st.Raw)), st.Seq
	}
	return breaks
}

func missing(from, next int64) ChainBreak {
	msg := fmt.Sprintf("entry %d is missing: entry %d follows entry %d", from, next, from-1)
	if next-from > 1 {
		msg = fmt.Sprintf("entries %d to %d are missing: entry %d follows entry %d", from, next-1, next, from-1)
	}
	if from == 1 {
		msg = fmt.Sprintf("entries 1 to %d are missing: the log starts at entry %d", next-1, next)
		if next == 2 {
			msg = "entry 1 is missing: the log starts at entry 2"
		}
	}
	return ChainBreak{Seq: from, Kind: BreakMissing, Message: msg}
}

func changed(seq int64, digest string, next int64, says string) ChainBreak {
	if seq == 0 {
		return ChainBreak{Seq: next, Kind: BreakChanged,
			Message: fmt.Sprintf("entry 1 was changed after it was written: it says an entry came before it (%s)", says)}
	}
	return ChainBreak{Seq: seq, Kind: BreakChanged,
		Message: fmt.Sprintf("entry %d was changed after it was written: its digest is %s, entry %d says %s", seq, digest, next, says)}
}

// AuditPage is one page of a tenant's log as the runs API serves it:
// entries as stored (their bytes are what the chain's digests are of),
// and where the next page starts, 0 after the last.
type AuditPage struct {
	SchemaVersion int                `json:"schema_version"`
	Namespace     string             `json:"namespace"`
	Entries       []StoredAuditEntry `json:"entries"`
	NextAfter     int64              `json:"next_after,omitempty"`
}
