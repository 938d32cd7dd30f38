package gitsource

import (
	"crypto/sha1"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// errTruncated: the connection ended before the pack did. Retrying may
// help, so it is a transient kind.
var errTruncated = fmt.Errorf("%w: the connection ended inside the pack", ErrUnreachable)

// packReader buffers a pack stream for the decoder. Every byte read from
// the source is written to the pack file as it arrives; bytes the decoder
// consumes feed the pack checksum and the current object's CRC in bulk,
// not byte by byte, which is what makes it fast.
type packReader struct {
	src   io.Reader
	out   io.Writer
	buf   []byte
	pos   int   // next byte to consume
	end   int   // end of buffered data
	base  int64 // stream offset of buf[0]
	total int64 // bytes received
	limit int64 // most bytes accepted
	mark  int   // consumed bytes before mark are already summed
	sum   hash.Hash
	crc   uint32
}

func newPackReader(src io.Reader, out io.Writer, limit int64) *packReader {
	return &packReader{src: src, out: out, buf: make([]byte, 256<<10), limit: limit, sum: sha1.New()}
}

// offset is the stream offset of the next byte to consume.
func (r *packReader) offset() int64 { return r.base + int64(r.pos) }

// account feeds the consumed, not yet summed bytes to the checksums.
func (r *packReader) account() {
	if r.pos > r.mark {
		b := r.buf[r.mark:r.pos]
		r.sum.Write(b)
		r.crc = crc32.Update(r.crc, crc32.IEEETable, b)
		r.mark = r.pos
	}
}

// startCRC begins a new object's CRC at the current offset.
func (r *packReader) startCRC() {
	r.account()
	r.crc = 0
}

// objectCRC is the CRC of the bytes consumed since startCRC.
func (r *packReader) objectCRC() uint32 {
	r.account()
	return r.crc
}

// checksum is the SHA-1 of every byte consumed so far.
func (r *packReader) checksum() []byte {
	r.account()
	return r.sum.Sum(nil)
}

func (r *packReader) fill() error {
	r.account()
	n := copy(r.buf, r.buf[r.pos:r.end])
	r.base += int64(r.pos)
	r.end, r.pos, r.mark = n, 0, 0
	for r.end == n {
		m, err := r.src.Read(r.buf[r.end:])
		if m > 0 {
			r.total += int64(m)
			if r.total > r.limit {
				return &LimitError{Limit: "repository size", Max: r.limit}
			}
			if _, werr := r.out.Write(r.buf[r.end : r.end+m]); werr != nil {
				return werr
			}
			r.end += m
		}
		if err == io.EOF && r.end == n {
			return errTruncated
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

// ReadByte implements io.ByteReader, which flate uses to never read past
// the end of a compressed object.
func (r *packReader) ReadByte() (byte, error) {
	if r.pos == r.end {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

// Read implements io.Reader.
func (r *packReader) Read(p []byte) (int, error) {
	if r.pos == r.end {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.pos:r.end])
	r.pos += n
	return n, nil
}

// drain reads what is left of the stream (a server may send nothing more,
// or a flush) into the pack file, so a sideband demuxer sees its end.
func (r *packReader) drain() error {
	extra := int64(r.end - r.pos)
	n, err := io.Copy(io.Discard, io.LimitReader(r.src, 1<<20))
	if err != nil {
		return err
	}
	if extra+n > 0 {
		return errTrailingData
	}
	return nil
}
