package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// testPack encodes a small pack in memory with go-git's encoder: similar
// blobs (so deltas form), a tree and a commit. refDeltas chooses REF_DELTA
// over OFS_DELTA.
func testPack(t testing.TB, refDeltas bool) ([]byte, map[plumbing.Hash]string) {
	t.Helper()
	st := memory.NewStorage()
	contents := map[plumbing.Hash]string{}
	var blobs []plumbing.Hash
	var entries []object.TreeEntry
	base := strings.Repeat("a line that repeats so deltas form\n", 50)
	for i := range 6 {
		content := base + fmt.Sprintf("variant %d\n", i)
		o := st.NewEncodedObject()
		o.SetType(plumbing.BlobObject)
		w, _ := o.Writer()
		io.WriteString(w, content)
		w.Close()
		h, err := st.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		contents[h] = content
		blobs = append(blobs, h)
		entries = append(entries, object.TreeEntry{Name: fmt.Sprintf("f%d", i), Mode: filemode.Regular, Hash: h})
	}
	tree := &object.Tree{Entries: entries}
	to := st.NewEncodedObject()
	if err := tree.Encode(to); err != nil {
		t.Fatal(err)
	}
	treeHash, _ := st.SetEncodedObject(to)
	commit := &object.Commit{Message: "m", TreeHash: treeHash,
		Author: object.Signature{Name: "a", Email: "a@x"}, Committer: object.Signature{Name: "a", Email: "a@x"}}
	co := st.NewEncodedObject()
	if err := commit.Encode(co); err != nil {
		t.Fatal(err)
	}
	commitHash, _ := st.SetEncodedObject(co)
	hashes := append([]plumbing.Hash{commitHash, treeHash}, blobs...)
	var buf bytes.Buffer
	if _, err := packfile.NewEncoder(&buf, st, refDeltas).Encode(hashes, 10); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), contents
}

var testLimits = ingestLimits{packBytes: 1 << 20, objectBytes: 1 << 20, deltaBytes: 1 << 20, objects: 1000}

func TestIngestPackWithDeltas(t *testing.T) {
	for name, refDeltas := range map[string]bool{"offset deltas": false, "ref deltas": true} {
		t.Run(name, func(t *testing.T) {
			pack, contents := testPack(t, refDeltas)
			dir := t.TempDir()
			store, _ := openRepoStore(dir)
			sp, err := newSpool(t.TempDir(), 1<<20, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer sp.close()
			n, err := ingestPack(bytes.NewReader(pack), store.packDir(), testLimits, sp)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(contents)+2 {
				t.Errorf("%d objects, want %d", n, len(contents)+2)
			}
			for h, want := range contents {
				r, _, ok, err := sp.open(h)
				if err != nil || !ok {
					t.Fatalf("blob %s not spooled: %v", h, err)
				}
				got, _ := io.ReadAll(r)
				if string(got) != want {
					t.Errorf("spooled blob %s differs", h)
				}
				blob, err := object.GetBlob(store.storage(), h)
				if err != nil {
					t.Fatalf("go-git cannot read blob %s from the pack: %v", h, err)
				}
				if blob.Size != int64(len(want)) {
					t.Errorf("blob %s: size %d", h, blob.Size)
				}
			}
			store.close()
		})
	}
}

func TestIngestPackRefusesBadPacks(t *testing.T) {
	pack, _ := testPack(t, false)
	flip := func(i int) []byte {
		b := bytes.Clone(pack)
		b[i] ^= 0xff
		return b
	}
	tests := map[string]struct {
		pack   []byte
		limits ingestLimits
		want   error
	}{
		"garbage":                       {pack: []byte("this is not a pack at all"), want: ErrCorrupt},
		"an unknown version":            {pack: append([]byte("PACK\x00\x00\x00\x09"), pack[8:]...), want: ErrCorrupt},
		"a stream that ends early":      {pack: pack[:len(pack)/2], want: ErrUnreachable},
		"a wrong checksum":              {pack: flip(len(pack) - 1), want: ErrCorrupt},
		"corrupt compressed data":       {pack: flip(40), want: ErrCorrupt},
		"data after the checksum":       {pack: append(bytes.Clone(pack), "extra"...), want: ErrCorrupt},
		"more objects than allowed":     {pack: pack, limits: ingestLimits{packBytes: 1 << 20, objectBytes: 1 << 20, deltaBytes: 1 << 20, objects: 3}, want: ErrTooLarge},
		"more bytes than allowed":       {pack: pack, limits: ingestLimits{packBytes: 100, objectBytes: 1 << 20, deltaBytes: 1 << 20, objects: 1000}, want: ErrTooLarge},
		"an object larger than allowed": {pack: pack, limits: ingestLimits{packBytes: 1 << 20, objectBytes: 100, deltaBytes: 1 << 20, objects: 1000}, want: ErrTooLarge},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lim := tc.limits
			if lim.objects == 0 {
				lim = testLimits
			}
			dir := t.TempDir()
			_, err := ingestPack(bytes.NewReader(tc.pack), dir, lim, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if left := entries(t, dir); left != nil {
				t.Errorf("files left: %v", left)
			}
		})
	}
}

// FuzzIngestPack feeds arbitrary bytes as a server's pack: the ingester
// fails with a typed error and leaves nothing, or writes a pack whose
// objects go-git reads back.
func FuzzIngestPack(f *testing.F) {
	ofs, _ := testPack(f, false)
	ref, _ := testPack(f, true)
	f.Add(ofs)
	f.Add(ref)
	f.Add(append(ofs, 0)) // odd lengths take the on-disk path
	f.Add(append(ref, 0))
	f.Add([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, pack []byte) {
		dir := t.TempDir()
		lim := ingestLimits{packBytes: 1 << 20, objectBytes: 1 << 16, deltaBytes: 1 << 16, objects: 1000}
		if len(pack)%2 == 1 {
			lim.memBytes = 32 // every delta resolved on disk
		}
		n, err := ingestPack(bytes.NewReader(pack), dir, lim, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnreachable) {
				t.Fatalf("untyped error %v", err)
			}
			if left := entries(t, dir); left != nil {
				t.Fatalf("files left after %v: %v", err, left)
			}
			return
		}
		packs, _ := filepath.Glob(filepath.Join(dir, "pack-*.idx"))
		if n > 0 && len(packs) != 1 {
			t.Fatalf("%d objects but packs %v", n, packs)
		}
		if n == 0 {
			if left := entries(t, dir); left != nil {
				t.Fatalf("an empty pack left %v", left)
			}
		}
		_ = os.RemoveAll(dir)
	})
}
