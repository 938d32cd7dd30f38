package gitsource

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// The pack ingester is a small `git index-pack`: it decodes the pack as it
// arrives from the network, inflating each object once to hash it, and
// writes the pack and its index straight into the object store. go-git's
// own path parses the pack again after writing it and inflates objects up
// to three times; see docs/benchmarks.md.

var (
	errTrailingData = fmt.Errorf("%w: data after the pack checksum", ErrCorrupt)
	errBadPack      = fmt.Errorf("%w: malformed pack", ErrCorrupt)
)

// ingestLimits bound what one pack may hold.
type ingestLimits struct {
	packBytes   int64  // bytes received
	objectBytes int64  // one inflated object, streamed
	deltaBytes  int64  // one delta or delta result
	objects     uint32 // objects in the pack
	// memBytes is the largest object or delta resolved in memory; larger
	// ones are resolved through files, so two similar 400 MB files cost a
	// few buffers, not several copies of themselves. 0: defaultMemBytes.
	memBytes int64
}

// defaultMemBytes: delta chains of source files and configs stay in
// memory (and in the content cache); models and data files go to disk.
const defaultMemBytes = 8 << 20

// packObject is what the index needs of one object, plus its type.
type packObject struct {
	offset int64
	hash   plumbing.Hash
	typ    plumbing.ObjectType // resolved type, never a delta
	crc    uint32
}

// ingester decodes one pack.
type ingester struct {
	r        *packReader
	file     *os.File // the pack being written, for delta bases
	lim      ingestLimits
	zr       io.ReadCloser
	objs     []packObject
	byOffset map[int64]int // index into objs
	byHash   map[plumbing.Hash]int
	deferred []deferredDelta
	cache    *contentCache
	spool    *spool
	copyBuf  []byte
	big      *bigObjects // large objects, resolved on disk
	pbuf     []byte      // streamPatch's buffer, allocated on first use
}

type deferredDelta struct {
	idx  int // into objs, filled in when resolved
	base plumbing.Hash
}

// ingestPack reads a pack from src into packDir as pack-<sum>.pack and
// .idx, written under temporary names and renamed once complete, so a
// failure leaves nothing behind. Blobs also go to sp when it is not nil.
// It returns the number of objects; 0 writes nothing.
func ingestPack(src io.Reader, packDir string, lim ingestLimits, sp *spool) (int, error) {
	tmp, err := os.CreateTemp(packDir, "tmp_pack_")
	if err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		tmp.Close()
		if !ok {
			_ = os.Remove(tmp.Name())
		}
	}()
	in := &ingester{
		r:        newPackReader(src, tmp, lim.packBytes),
		file:     tmp,
		lim:      lim,
		byOffset: make(map[int64]int),
		byHash:   make(map[plumbing.Hash]int),
		cache:    newContentCache(8 << 20),
		spool:    sp,
		copyBuf:  make([]byte, 32<<10),
		big:      &bigObjects{dir: packDir, files: map[int64]bigObject{}},
	}
	if in.lim.memBytes <= 0 {
		in.lim.memBytes = defaultMemBytes
	}
	defer in.big.close()
	sum, err := in.run()
	if err != nil || len(in.objs) == 0 {
		return 0, err
	}
	if err := in.writeIndex(packDir, tmp.Name(), sum); err != nil {
		return 0, err
	}
	ok = true
	return len(in.objs), nil
}

func (in *ingester) run() (plumbing.Hash, error) {
	count, err := in.header()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	in.objs = make([]packObject, 0, min(count, 1<<16))
	for range count {
		if err := in.object(); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if err := in.resolveDeferred(); err != nil {
		return plumbing.ZeroHash, err
	}
	want := in.r.checksum()
	var got plumbing.Hash
	if _, err := io.ReadFull(in.r, got[:]); err != nil {
		return plumbing.ZeroHash, eofCorrupt(err)
	}
	if !bytes.Equal(want, got[:]) {
		return plumbing.ZeroHash, fmt.Errorf("%w: pack checksum mismatch", ErrCorrupt)
	}
	return got, in.r.drain()
}

func (in *ingester) header() (uint32, error) {
	var h [12]byte
	if _, err := io.ReadFull(in.r, h[:]); err != nil {
		return 0, eofCorrupt(err)
	}
	if string(h[:4]) != "PACK" {
		return 0, fmt.Errorf("%w: not a pack", ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(h[4:8]); v != 2 && v != 3 {
		return 0, fmt.Errorf("%w: pack version %d", ErrCorrupt, v)
	}
	count := binary.BigEndian.Uint32(h[8:12])
	if count > in.lim.objects {
		return 0, &LimitError{Limit: "object count", Max: int64(in.lim.objects)}
	}
	return count, nil
}

// object decodes the next object of the stream.
func (in *ingester) object() error {
	in.r.startCRC()
	offset := in.r.offset()
	typ, size, err := readObjectHeader(in.r)
	if err != nil {
		return err
	}
	if err := in.checkSize(typ, size); err != nil {
		return err
	}
	obj := packObject{offset: offset, typ: typ}
	switch typ {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
		obj.hash, err = in.inflateAndHash(typ, size)
	case plumbing.OFSDeltaObject:
		obj, err = in.ofsDelta(obj, size)
	case plumbing.REFDeltaObject:
		return in.refDelta(obj, size)
	default:
		return errBadPack
	}
	if err != nil {
		return err
	}
	obj.crc = in.r.objectCRC()
	in.add(obj)
	return nil
}

// checkSize bounds an object before it is read: whole objects stream, but
// deltas and what they produce are held in memory.
func (in *ingester) checkSize(typ plumbing.ObjectType, size int64) error {
	limit := in.lim.objectBytes
	if typ == plumbing.OFSDeltaObject || typ == plumbing.REFDeltaObject {
		limit = in.lim.deltaBytes
	}
	if size > limit {
		// A whole object larger than the archive allowance can never be
		// archived; a delta larger than a file may not be held.
		name := "archive size"
		if limit == in.lim.deltaBytes {
			name = "file size"
		}
		return &LimitError{Limit: name, Max: limit}
	}
	return nil
}

func (in *ingester) add(obj packObject) {
	in.byOffset[obj.offset] = len(in.objs)
	in.byHash[obj.hash] = len(in.objs)
	in.objs = append(in.objs, obj)
}

// inflateAndHash streams a whole object through the hasher (and the spool,
// for blobs) without holding it in memory.
func (in *ingester) inflateAndHash(typ plumbing.ObjectType, size int64) (plumbing.Hash, error) {
	if err := in.resetZlib(); err != nil {
		return plumbing.ZeroHash, err
	}
	h := plumbing.NewHasher(typ, size)
	var w io.Writer = h
	var sw *spoolWriter
	if typ == plumbing.BlobObject && in.spool != nil && in.spool.fits(size) {
		sw = in.spool.begin()
		w = io.MultiWriter(h, sw)
	}
	n, err := io.CopyBuffer(w, io.LimitReader(in.zr, size), in.copyBuf)
	if err != nil {
		return plumbing.ZeroHash, eofCorrupt(err)
	}
	if n != size {
		return plumbing.ZeroHash, fmt.Errorf("%w: object shorter than its header says", ErrCorrupt)
	}
	if err := in.endZlib(); err != nil {
		return plumbing.ZeroHash, err
	}
	sum := h.Sum()
	if sw != nil {
		if err := sw.commit(sum); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return sum, nil
}

// inflateAll reads one compressed object of size bytes into memory.
func (in *ingester) inflateAll(size int64) ([]byte, error) {
	if err := in.resetZlib(); err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(in.zr, data); err != nil {
		return nil, eofCorrupt(err)
	}
	return data, in.endZlib()
}

func (in *ingester) resetZlib() error {
	if in.zr == nil {
		zr, err := zlib.NewReader(in.r)
		if err != nil {
			return eofCorrupt(err)
		}
		in.zr = zr
		return nil
	}
	return eofCorrupt(in.zr.(zlib.Resetter).Reset(in.r, nil))
}

// endZlib reads the end of the zlib stream, which checks its checksum, and
// refuses extra data inside it.
func (in *ingester) endZlib() error {
	var b [1]byte
	n, err := in.zr.Read(b[:])
	if n > 0 {
		return fmt.Errorf("%w: object longer than its header says", ErrCorrupt)
	}
	if err != io.EOF {
		return eofCorrupt(err)
	}
	return nil
}

func (in *ingester) ofsDelta(obj packObject, size int64) (packObject, error) {
	rel, err := readOffset(in.r)
	if err != nil {
		return obj, err
	}
	baseOff := obj.offset - rel
	bi, ok := in.byOffset[baseOff]
	if rel <= 0 || !ok {
		return obj, fmt.Errorf("%w: delta base not in the pack", ErrCorrupt)
	}
	delta, err := in.inflateDelta(size)
	if err != nil {
		return obj, err
	}
	defer delta.close()
	if in.large(delta) {
		return in.applyDeltaOnDisk(obj, baseOff, delta)
	}
	return in.applyDelta(obj, bi, delta.data)
}

// refDelta handles a delta against an object named by hash, which git only
// sends when its base comes earlier in the pack (or in thin packs, which
// are never asked for). Bases not seen yet are resolved at the end.
func (in *ingester) refDelta(obj packObject, size int64) error {
	var base plumbing.Hash
	if _, err := io.ReadFull(in.r, base[:]); err != nil {
		return eofCorrupt(err)
	}
	if err := in.skipObject(size); err != nil {
		return err
	}
	obj.crc = in.r.objectCRC()
	in.byOffset[obj.offset] = len(in.objs)
	in.objs = append(in.objs, obj) // hash and type filled in when resolved
	in.deferred = append(in.deferred, deferredDelta{idx: len(in.objs) - 1, base: base})
	return nil
}

func (in *ingester) resolveDeferred() error {
	for len(in.deferred) > 0 {
		progress := false
		rest := in.deferred[:0]
		for _, d := range in.deferred {
			if _, ok := in.byHash[d.base]; !ok {
				rest = append(rest, d)
				continue
			}
			if err := in.resolveRefDelta(d); err != nil {
				return err
			}
			progress = true
		}
		in.deferred = rest
		if !progress {
			return fmt.Errorf("%w: delta base %s not in the pack", ErrCorrupt, in.deferred[0].base)
		}
	}
	return nil
}

func (in *ingester) applyDelta(obj packObject, baseIdx int, delta []byte) (packObject, error) {
	base, typ, err := in.contentAt(in.objs[baseIdx].offset)
	if err != nil {
		return obj, err
	}
	content, err := in.patch(base, delta)
	if err != nil {
		return obj, err
	}
	obj.typ, obj.hash = typ, plumbing.ComputeHash(typ, content)
	in.cache.put(obj.offset, typ, content)
	return obj, in.spoolContent(typ, obj.hash, content)
}

// patch applies a delta after checking the sizes it declares.
func (in *ingester) patch(base, delta []byte) ([]byte, error) {
	srcSize, rest, ok := leb128(delta)
	if !ok || srcSize != uint64(len(base)) {
		return nil, fmt.Errorf("%w: delta does not fit its base", ErrCorrupt)
	}
	dstSize, _, ok := leb128(rest)
	if !ok {
		return nil, errBadPack
	}
	if dstSize > uint64(in.lim.deltaBytes) {
		return nil, &LimitError{Limit: "file size", Max: in.lim.deltaBytes}
	}
	out, err := packfile.PatchDelta(base, delta)
	if err != nil {
		return nil, fmt.Errorf("%w: bad delta: %w", ErrCorrupt, err)
	}
	return out, nil
}

func (in *ingester) spoolContent(typ plumbing.ObjectType, h plumbing.Hash, content []byte) error {
	if typ != plumbing.BlobObject || in.spool == nil || !in.spool.fits(int64(len(content))) {
		return nil
	}
	sw := in.spool.begin()
	if _, err := sw.Write(content); err != nil {
		return err
	}
	return sw.commit(h)
}

// contentAt returns the full content and type of the (small) object at
// offset, resolving deltas by reading their bases back from the pack file,
// or from disk for bases too large for memory.
func (in *ingester) contentAt(offset int64) ([]byte, plumbing.ObjectType, error) {
	return in.contentAtDepth(offset, 0)
}

func (in *ingester) contentAtDepth(offset int64, depth int) ([]byte, plumbing.ObjectType, error) {
	if c, typ, ok := in.cache.get(offset); ok {
		return c, typ, nil
	}
	if depth > 4095 {
		return nil, 0, fmt.Errorf("%w: delta chain too long", ErrCorrupt)
	}
	raw, err := in.readAt(offset)
	if err != nil {
		return nil, 0, err
	}
	if raw.baseOffset < 0 {
		in.cache.put(offset, raw.typ, raw.data)
		return raw.data, raw.typ, nil
	}
	var content []byte
	var typ plumbing.ObjectType
	if src, _, ok := leb128(raw.data); ok && int64(src) > in.lim.memBytes {
		var buf bytes.Buffer
		typ, err = in.patchFromDisk(raw.baseOffset, bufio.NewReader(bytes.NewReader(raw.data)), &buf)
		content = buf.Bytes()
	} else {
		var base []byte
		if base, typ, err = in.contentAtDepth(raw.baseOffset, depth+1); err == nil {
			content, err = in.patch(base, raw.data)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	in.cache.put(offset, typ, content)
	return content, typ, nil
}

type rawObject struct {
	typ        plumbing.ObjectType // for deltas, unset
	data       []byte              // content, or the delta
	baseOffset int64               // -1 when not a delta
}

// readAt decodes the object at offset from the pack file written so far.
func (in *ingester) readAt(offset int64) (rawObject, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(in.file, offset, 1<<62), 16<<10)
	typ, size, err := readObjectHeader(br)
	if err != nil {
		return rawObject{}, err
	}
	// Read back into memory: a small object or a delta, bounded like one.
	if size > max(in.lim.memBytes, in.lim.deltaBytes) {
		return rawObject{}, &LimitError{Limit: "file size", Max: in.lim.deltaBytes}
	}
	raw := rawObject{typ: typ, baseOffset: -1}
	switch typ {
	case plumbing.OFSDeltaObject:
		rel, err := readOffset(br)
		if err != nil {
			return raw, err
		}
		raw.baseOffset = offset - rel
	case plumbing.REFDeltaObject:
		var h plumbing.Hash
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return raw, eofCorrupt(err)
		}
		bi, ok := in.byHash[h]
		if !ok {
			return raw, fmt.Errorf("%w: delta base %s not in the pack", ErrCorrupt, h)
		}
		raw.baseOffset = in.objs[bi].offset
	}
	zr, err := zlib.NewReader(br)
	if err != nil {
		return raw, eofCorrupt(err)
	}
	raw.data = make([]byte, size)
	if _, err := io.ReadFull(zr, raw.data); err != nil {
		return raw, eofCorrupt(err)
	}
	return raw, nil
}

func (in *ingester) writeIndex(packDir, tmpPack string, sum plumbing.Hash) error {
	var w idxfile.Writer
	if err := w.OnHeader(uint32(len(in.objs))); err != nil {
		return err
	}
	for _, o := range in.objs {
		w.Add(o.hash, uint64(o.offset), o.crc)
	}
	if err := w.OnFooter(sum); err != nil {
		return err
	}
	idx, err := w.Index()
	if err != nil {
		return err
	}
	if err := in.file.Sync(); err != nil {
		return err
	}
	name := filepath.Join(packDir, "pack-"+hex.EncodeToString(sum[:]))
	idxTmp, err := os.CreateTemp(packDir, "tmp_idx_")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(idxTmp.Name()) }() // gone already once renamed
	bw := bufio.NewWriter(idxTmp)
	if _, err := idxfile.NewEncoder(bw).Encode(idx); err != nil {
		idxTmp.Close()
		return err
	}
	if err := errors.Join(bw.Flush(), idxTmp.Close()); err != nil {
		return err
	}
	// The pack goes first: a reader finding the .idx finds its pack.
	if err := os.Rename(tmpPack, name+".pack"); err != nil {
		return err
	}
	return os.Rename(idxTmp.Name(), name+".idx")
}

// readObjectHeader reads a pack object's type and inflated size.
func readObjectHeader(r io.ByteReader) (plumbing.ObjectType, int64, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, 0, eofCorrupt(err)
	}
	typ := plumbing.ObjectType((b >> 4) & 7)
	size := int64(b & 15)
	shift := uint(4)
	for b&0x80 != 0 {
		if shift > 56 {
			return 0, 0, errBadPack
		}
		if b, err = r.ReadByte(); err != nil {
			return 0, 0, eofCorrupt(err)
		}
		size |= int64(b&0x7f) << shift
		shift += 7
	}
	return typ, size, nil
}

// readOffset reads an OFS_DELTA's distance back to its base.
func readOffset(r io.ByteReader) (int64, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, eofCorrupt(err)
	}
	off := int64(b & 0x7f)
	for i := 0; b&0x80 != 0; i++ {
		if i > 8 {
			return 0, errBadPack
		}
		if b, err = r.ReadByte(); err != nil {
			return 0, eofCorrupt(err)
		}
		off = ((off + 1) << 7) | int64(b&0x7f)
	}
	return off, nil
}

// leb128 reads a delta header size.
func leb128(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, b[i+1:], true
		}
	}
	return 0, nil, false
}

// eofCorrupt reports compressed data that is malformed or ends early as
// corrupt; other errors (limits, a dropped connection) pass through.
func eofCorrupt(err error) error {
	var ce flate.CorruptInputError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the pack ends early", ErrCorrupt)
	case errors.As(err, &ce), errors.Is(err, zlib.ErrChecksum), errors.Is(err, zlib.ErrHeader),
		errors.Is(err, zlib.ErrDictionary):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}
