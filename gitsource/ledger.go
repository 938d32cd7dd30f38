package gitsource

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"
)

// Ledger is the bounded record of a repository's run tags and run refs
// that makes run creation exactly-once without storing every ref: refs that
// started a run are recorded by their runs (RunIndex), so the ledger keeps
// only a digest of the whole set and fingerprints of the refs that started
// none (present when the repository was registered, or refused). Its size
// grows with those refs only, about 7 bytes each once encoded.
type Ledger struct {
	// Digest names the watched run tags and run refs, with their objects,
	// as the last poll saw them: a listing with the same digest has
	// nothing new, and no run need be looked up.
	Digest string
	// Unrun are the fingerprints of the refs of the last poll that
	// started no run.
	Unrun Fingerprints
}

// RunIndex says which run refs have a run, and which runs are still going.
type RunIndex struct {
	// Ran holds RunKey(ref, object) of every run tag and run ref with a
	// run; RunKey(ref, commit) for runs that predate object keys.
	Ran map[string]bool
	// Live are the runs not ended and not cancelled, by their trigger.
	Live []RunTrigger
}

// RunTrigger is where a run's ref pointed when it requested the run.
type RunTrigger struct {
	Ref string
	// Object is the ref's object: an annotated tag, or the commit; empty
	// for runs that predate object keys.
	Object string
	Commit string
}

// RunKey keys a ref at an object (or commit) in RunIndex.Ran.
func RunKey(ref, object string) string { return ref + "\x00" + object }

// ran reports whether the ref at r has a run.
func (ix RunIndex) ran(name string, r Ref) bool {
	return ix.Ran[RunKey(name, r.SHA)] || ix.Ran[RunKey(name, r.Commit())]
}

// RunRefs is the part of watched refs (Watched) that are run tags and
// run refs: all but the branches.
func (t Triggers) RunRefs(watched RefSet) RefSet {
	out := make(RefSet, len(watched))
	for name, r := range watched {
		if !strings.HasPrefix(name, branchPrefix) {
			out[name] = r
		}
	}
	return out
}

// WatchedBranches is the part of watched refs that are branches.
func (t Triggers) WatchedBranches(watched RefSet) RefSet {
	out := make(RefSet)
	for name, r := range watched {
		if strings.HasPrefix(name, branchPrefix) {
			out[name] = r
		}
	}
	return out
}

const branchPrefix = "refs/heads/"

// sha1Size is the size of a git object name.
const sha1Size = 20

// RunRefsDigest names the run tags and run refs among watched refs, with
// their objects: the same refs give the same digest. It sums a hash of
// each ref, so it needs no sorting: one pass, no allocation per ref. Each
// ref is hashed as its name and its object's 20 bytes (an annotated tag's
// commit follows from the tag object).
//
// The hash is XXH3's 128 bits, not a cryptographic one: the digest only
// tells an idle listing from a changed one, of refs the repository's own
// writers push (20,000 run tags: 2.85 ms of CPU with SHA-256, 2.54 ms with
// XXH3, BenchmarkIdlePollPassesByRefs/digest). A digest of the earlier form (64 hex digits) never matches, so
// the first poll after an upgrade compares the refs in full once.
func RunRefsDigest(watched RefSet) string {
	var hi, lo uint64
	var buf []byte
	for name, r := range watched {
		if strings.HasPrefix(name, branchPrefix) {
			continue
		}
		buf = appendObject(append(append(buf[:0], name...), 0), r.SHA)
		h := xxh3.Hash128(buf)
		hi, lo = hi+h.Hi, lo+h.Lo
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, 16), hi)
	return hex.EncodeToString(binary.BigEndian.AppendUint64(out, lo))
}

// appendObject appends a git object name as its 20 bytes, or as it is
// when it is not 40 hex digits.
func appendObject(dst []byte, sha string) []byte {
	if len(sha) != 2*sha1Size {
		return append(dst, sha...)
	}
	n := len(dst)
	for i := 0; i < len(sha); i += 2 {
		hi, ok1 := fromHex(sha[i])
		lo, ok2 := fromHex(sha[i+1])
		if !ok1 || !ok2 {
			return append(dst[:n], sha...)
		}
		dst = append(dst, hi<<4|lo)
	}
	return dst
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// WithBranches is watched with its branches replaced by branches: watched
// itself when they are the same.
func WithBranches(watched, branches RefSet) RefSet {
	same := true
	n := 0
	for name, r := range watched {
		if strings.HasPrefix(name, branchPrefix) {
			n++
			if b, ok := branches[name]; !ok || b != r {
				same = false
			}
		}
	}
	if same && n == len(branches) {
		return watched
	}
	out := maps.Clone(watched)
	maps.DeleteFunc(out, func(name string, _ Ref) bool { return strings.HasPrefix(name, branchPrefix) })
	maps.Copy(out, branches)
	return out
}

// PreviousRunRefs rebuilds what the last poll saw of the run tags and run
// refs in cur (cur holds only those; an unchanged cur is returned itself), for Detect to compare with: a ref
// counts as seen if the listing is unchanged since (same digest), if it has
// a run, if it is among the ledger's unrun fingerprints or in legacy (what
// an older status recorded), or, on a repository's first poll, if it is a
// run tag. A live run whose ref went or moved away enters as its old
// object, so Detect cancels it; further live runs of the same ref come back
// as cancellations.
func PreviousRunRefs(cur RefSet, t Triggers, l Ledger, ix RunIndex, legacy RefSet, first bool) (RefSet, []Event) {
	t = t.WithDefaults()
	if l.Digest != "" && l.Digest == RunRefsDigest(cur) {
		return cur, nil
	}
	prev := RefSet{}
	for name, r := range cur {
		seen := ix.ran(name, r) || l.Unrun.Has(Fingerprint(name, r)) ||
			legacy[name] == r || (first && t.kindOf(name) == refRunTag)
		if seen {
			prev[name] = r
		}
	}
	var cancels []Event
	for _, run := range ix.Live {
		if c, ok := cur[run.Ref]; ok && (c.SHA == run.Object || (run.Object == "" && c.Commit() == run.Commit)) {
			continue
		}
		old := Ref{SHA: run.Commit}
		if run.Object != "" && run.Object != run.Commit {
			old = Ref{SHA: run.Object, Peeled: run.Commit}
		}
		if _, ok := prev[run.Ref]; ok {
			cancels = append(cancels, Event{Kind: KindCancel, Ref: run.Ref, Commit: run.Commit, Tag: tagObject(old)})
			continue
		}
		prev[run.Ref] = old
	}
	return prev, cancels
}

// RecordRunRefs is the ledger after a poll that saw cur (run tags and run
// refs only) and handled all of it: refs without a run in ix are kept as
// fingerprints.
func RecordRunRefs(cur RefSet, ix RunIndex) Ledger {
	var fps Fingerprints
	for name, r := range cur {
		if !ix.ran(name, r) {
			fps = append(fps, Fingerprint(name, r))
		}
	}
	slices.Sort(fps)
	return Ledger{Digest: RunRefsDigest(cur), Unrun: slices.Compact(fps)}
}

// Fingerprints is a sorted set of 48-bit ref fingerprints. Two refs share
// one with odds of about n in 2.8e14 for n recorded refs.
type Fingerprints []uint64

// Fingerprint is the fingerprint of a ref at an object.
func Fingerprint(name string, r Ref) uint64 {
	sum := sha256.Sum256([]byte(name + "\x00" + r.SHA))
	return binary.BigEndian.Uint64(sum[:8]) >> 16
}

// Has reports whether fp is in the set.
func (f Fingerprints) Has(fp uint64) bool {
	_, ok := slices.BinarySearch(f, fp)
	return ok
}

// Encode packs the sorted set as varint deltas: about 5 bytes a ref at
// 20,000 refs.
func (f Fingerprints) Encode() []byte {
	out := make([]byte, 0, len(f)*5)
	var last uint64
	for _, fp := range f {
		out = binary.AppendUvarint(out, fp-last)
		last = fp
	}
	return out
}

// DecodeFingerprints reads what Encode wrote.
func DecodeFingerprints(b []byte) (Fingerprints, error) {
	var out Fingerprints
	var last uint64
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("malformed ref fingerprints")
		}
		last += d
		out = append(out, last)
		b = b[n:]
	}
	return out, nil
}
