package gitsource

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
)

// Large objects are resolved through files, never whole in memory: a delta
// larger than memBytes is inflated to a file, a large base is inflated to
// a file once, and a delta whose base or result is large is applied by
// streaming copies out of the base's file into the result's file, the
// hasher and the spool. Memory stays a few buffers whatever the sizes.

// bigObject is the content of a large object, in an unlinked file.
type bigObject struct {
	f    *os.File
	size int64
	typ  plumbing.ObjectType
}

// bigObjects are the large objects of one pack resolved so far, by offset.
type bigObjects struct {
	dir   string
	files map[int64]bigObject
}

// create returns a new file, unlinked at once: the space is freed however
// the process ends.
func (b *bigObjects) create() (*os.File, error) {
	f, err := os.CreateTemp(b.dir, "tmp_obj_")
	if err == nil {
		_ = os.Remove(f.Name())
	}
	return f, err
}

func (b *bigObjects) close() {
	for _, o := range b.files {
		_ = o.f.Close()
	}
}

// deltaData is one delta, in memory or (large) in a file, with the sizes
// its header declares.
type deltaData struct {
	data     []byte
	file     *os.File
	src, dst int64
}

func (d *deltaData) reader() (*bufio.Reader, error) {
	if d.file == nil {
		return bufio.NewReader(bytes.NewReader(d.data)), nil
	}
	if _, err := d.file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return bufio.NewReaderSize(d.file, 64<<10), nil
}

func (d *deltaData) close() {
	if d.file != nil {
		_ = d.file.Close()
	}
}

// large: the delta, its base or its result is too large for memory.
func (in *ingester) large(d *deltaData) bool {
	return d.file != nil || d.src > in.lim.memBytes || d.dst > in.lim.memBytes
}

// inflateDelta reads the next object of the stream, a delta of size bytes,
// into memory or, past memBytes, into a file.
func (in *ingester) inflateDelta(size int64) (*deltaData, error) {
	d := &deltaData{}
	if size <= in.lim.memBytes {
		data, err := in.inflateAll(size)
		if err != nil {
			return nil, err
		}
		d.data = data
	} else {
		f, err := in.big.create()
		if err != nil {
			return nil, err
		}
		d.file = f
		if err := in.inflateTo(f, size); err != nil {
			d.close()
			return nil, err
		}
	}
	r, err := d.reader()
	if err == nil {
		d.src, d.dst, err = readDeltaHeader(r)
	}
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// inflateTo streams the next object of the stream, size bytes, to w.
func (in *ingester) inflateTo(w io.Writer, size int64) error {
	if err := in.resetZlib(); err != nil {
		return err
	}
	n, err := io.CopyBuffer(w, io.LimitReader(in.zr, size), in.copyBuf)
	if err != nil {
		return eofCorrupt(err)
	}
	if n != size {
		return fmt.Errorf("%w: object shorter than its header says", ErrCorrupt)
	}
	return in.endZlib()
}

// skipObject checks and drops the next object of the stream.
func (in *ingester) skipObject(size int64) error { return in.inflateTo(io.Discard, size) }

// applyDeltaOnDisk resolves a large delta against the object at baseOff
// into a file, hashing and spooling the result as it is written.
func (in *ingester) applyDeltaOnDisk(obj packObject, baseOff int64, d *deltaData) (packObject, error) {
	if d.dst > in.lim.deltaBytes {
		return obj, &LimitError{Limit: "file size", Max: in.lim.deltaBytes}
	}
	base, baseSize, typ, err := in.baseFile(baseOff)
	if err != nil {
		return obj, err
	}
	out, err := in.big.create()
	if err != nil {
		return obj, err
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	h := plumbing.NewHasher(typ, d.dst)
	writers := []io.Writer{bw, h}
	var sw *spoolWriter
	if typ == plumbing.BlobObject && in.spool != nil && in.spool.fits(d.dst) {
		sw = in.spool.begin()
		writers = append(writers, sw)
	}
	dr, err := d.reader()
	if err == nil {
		err = streamPatch(base, baseSize, dr, io.MultiWriter(writers...), d.dst, in.patchBuf())
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		_ = out.Close()
		return obj, err
	}
	in.big.files[obj.offset] = bigObject{f: out, size: d.dst, typ: typ}
	obj.typ, obj.hash = typ, h.Sum()
	if sw != nil {
		return obj, sw.commit(obj.hash)
	}
	return obj, nil
}

// patchFromDisk applies a (small) delta to the large object at baseOff.
func (in *ingester) patchFromDisk(baseOff int64, delta *bufio.Reader, w io.Writer) (plumbing.ObjectType, error) {
	base, baseSize, typ, err := in.baseFile(baseOff)
	if err != nil {
		return 0, err
	}
	peek, _ := delta.Peek(20)
	_, rest, _ := leb128(peek)
	dst, _, ok := leb128(rest)
	if !ok || int64(dst) > in.lim.memBytes {
		return 0, errBadPack
	}
	return typ, streamPatch(base, baseSize, delta, w, int64(dst), in.patchBuf())
}

// resolveRefDelta resolves a deferred REF_DELTA whose base is now known.
func (in *ingester) resolveRefDelta(d deferredDelta) error {
	obj := in.objs[d.idx]
	dd, baseOff, err := in.deltaAt(obj.offset)
	if err != nil {
		return err
	}
	defer dd.close()
	if in.large(dd) {
		if obj, err = in.applyDeltaOnDisk(obj, baseOff, dd); err != nil {
			return err
		}
	} else {
		content, typ, err := in.contentAt(obj.offset)
		if err != nil {
			return err
		}
		obj.typ, obj.hash = typ, plumbing.ComputeHash(typ, content)
		if err := in.spoolContent(typ, obj.hash, content); err != nil {
			return err
		}
	}
	in.objs[d.idx] = obj
	in.byHash[obj.hash] = d.idx
	return nil
}

// deltaAt reads back the REF_DELTA at offset from the pack file: into
// memory, or into a file past memBytes. It returns its base's offset.
func (in *ingester) deltaAt(offset int64) (*deltaData, int64, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(in.file, offset, 1<<62), 16<<10)
	typ, size, err := readObjectHeader(br)
	if err != nil {
		return nil, 0, err
	}
	var base plumbing.Hash
	if typ != plumbing.REFDeltaObject {
		return nil, 0, errBadPack
	}
	if _, err := io.ReadFull(br, base[:]); err != nil {
		return nil, 0, eofCorrupt(err)
	}
	bi, ok := in.byHash[base]
	if !ok {
		return nil, 0, fmt.Errorf("%w: delta base %s not in the pack", ErrCorrupt, base)
	}
	zr, err := zlib.NewReader(br)
	if err != nil {
		return nil, 0, eofCorrupt(err)
	}
	d := &deltaData{}
	var w io.Writer
	if size <= in.lim.memBytes {
		buf := &bytes.Buffer{}
		buf.Grow(int(size))
		w = buf
	} else {
		if d.file, err = in.big.create(); err != nil {
			return nil, 0, err
		}
		w = d.file
	}
	if n, err := io.CopyBuffer(w, io.LimitReader(zr, size), in.patchBuf()); err != nil || n != size {
		d.close()
		return nil, 0, fmt.Errorf("%w: the pack ends early", ErrCorrupt)
	}
	if d.file == nil {
		d.data = w.(*bytes.Buffer).Bytes()
	}
	r, err := d.reader()
	if err == nil {
		d.src, d.dst, err = readDeltaHeader(r)
	}
	if err != nil {
		d.close()
		return nil, 0, err
	}
	return d, in.objs[bi].offset, nil
}

// baseFile returns the content of the object at offset for random access:
// from memory for a small one, from its file for a large one, inflating a
// large whole object to a file the first time it is a base.
func (in *ingester) baseFile(offset int64) (io.ReaderAt, int64, plumbing.ObjectType, error) {
	if b, ok := in.big.files[offset]; ok {
		return b.f, b.size, b.typ, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(in.file, offset, 1<<62), 16<<10)
	typ, size, err := readObjectHeader(br)
	if err != nil {
		return nil, 0, 0, err
	}
	if typ == plumbing.OFSDeltaObject || typ == plumbing.REFDeltaObject || size <= in.lim.memBytes {
		// Large delta results are in files already: this one is small.
		c, t, err := in.contentAt(offset)
		return bytes.NewReader(c), int64(len(c)), t, err
	}
	f, err := in.big.create()
	if err != nil {
		return nil, 0, 0, err
	}
	zr, err := zlib.NewReader(br)
	if err != nil {
		_ = f.Close()
		return nil, 0, 0, eofCorrupt(err)
	}
	n, err := io.CopyBuffer(f, io.LimitReader(zr, size), in.patchBuf())
	if err == nil && n != size {
		err = fmt.Errorf("%w: object shorter than its header says", ErrCorrupt)
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, 0, eofCorrupt(err)
	}
	in.big.files[offset] = bigObject{f: f, size: size, typ: typ}
	return f, size, typ, nil
}

func (in *ingester) patchBuf() []byte {
	if in.pbuf == nil {
		in.pbuf = make([]byte, 256<<10)
	}
	return in.pbuf
}

// readDeltaHeader reads a delta's base and result sizes.
func readDeltaHeader(r *bufio.Reader) (int64, int64, error) {
	src, err := readDeltaSize(r)
	if err != nil {
		return 0, 0, err
	}
	dst, err := readDeltaSize(r)
	return src, dst, err
}

func readDeltaSize(r *bufio.Reader) (int64, error) {
	var v uint64
	for i := range 9 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, errBadPack
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			return int64(v), nil
		}
	}
	return 0, errBadPack
}

// streamPatch applies a git delta read from delta to base, writing the
// dst bytes of the result to w; memory is buf.
func streamPatch(base io.ReaderAt, baseSize int64, delta *bufio.Reader, w io.Writer, dst int64, buf []byte) error {
	src, size, err := readDeltaHeader(delta)
	if err != nil {
		return err
	}
	if src != baseSize || size != dst {
		return fmt.Errorf("%w: delta does not fit its base", ErrCorrupt)
	}
	bad := fmt.Errorf("%w: bad delta", ErrCorrupt)
	var written int64
	for {
		cmd, err := delta.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case cmd&0x80 != 0:
			off, n, err := copyArgs(cmd, delta)
			if err != nil || off+n > baseSize || written+n > dst {
				return bad
			}
			for n > 0 {
				k := min(n, int64(len(buf)))
				if got, err := base.ReadAt(buf[:k], off); int64(got) < k {
					return fmt.Errorf("reading a delta base: %w", err)
				}
				if _, err := w.Write(buf[:k]); err != nil {
					return err
				}
				off, n, written = off+k, n-k, written+k
			}
		case cmd != 0:
			if written+int64(cmd) > dst {
				return bad
			}
			if _, err := io.CopyN(w, delta, int64(cmd)); err != nil {
				return bad
			}
			written += int64(cmd)
		default:
			return bad
		}
	}
	if written != dst {
		return bad
	}
	return nil
}

// copyArgs reads a copy instruction's offset and size.
func copyArgs(cmd byte, r *bufio.Reader) (int64, int64, error) {
	var off, n int64
	for i := range 4 {
		if cmd&(1<<i) != 0 {
			b, err := r.ReadByte()
			if err != nil {
				return 0, 0, err
			}
			off |= int64(b) << (8 * i)
		}
	}
	for i := range 3 {
		if cmd&(0x10<<i) != 0 {
			b, err := r.ReadByte()
			if err != nil {
				return 0, 0, err
			}
			n |= int64(b) << (8 * i)
		}
	}
	if n == 0 {
		n = 0x10000
	}
	return off, n, nil
}
