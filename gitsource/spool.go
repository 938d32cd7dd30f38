package gitsource

import (
	"bufio"
	"container/list"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
)

// spool keeps the blobs of a freshly received pack uncompressed in a
// temporary file, so the archive that follows copies them instead of
// inflating them a second time.
type spool struct {
	maxBlob, maxTotal int64 // larger blobs stay compressed in the pack
	f                 *os.File
	w                 *bufio.Writer
	size              int64
	blobs             map[plumbing.Hash]spoolEntry
}

type spoolEntry struct{ off, size int64 }

func newSpool(dir string, maxBlob, maxTotal int64) (*spool, error) {
	f, err := os.CreateTemp(dir, "spool_")
	if err != nil {
		return nil, err
	}
	// Unlinked at once: the space is freed however the process ends.
	_ = os.Remove(f.Name())
	return &spool{maxBlob: maxBlob, maxTotal: maxTotal, f: f, w: bufio.NewWriterSize(f, 256<<10), blobs: make(map[plumbing.Hash]spoolEntry)}, nil
}

// fits reports whether a blob of size should be spooled: blobs over a
// file's limit will fail the archive anyway, and the spool never grows past
// an archive's. Blobs left out are read from the pack.
func (s *spool) fits(size int64) bool {
	return size <= s.maxBlob && s.size+size <= s.maxTotal
}

// close releases the file.
func (s *spool) close() error { return s.f.Close() }

// begin starts writing one blob.
func (s *spool) begin() *spoolWriter { return &spoolWriter{s: s, off: s.size} }

// open returns a blob's content, ok false if it is not spooled.
func (s *spool) open(h plumbing.Hash) (io.Reader, int64, bool, error) {
	e, ok := s.blobs[h]
	if !ok {
		return nil, 0, false, nil
	}
	if s.w.Buffered() > 0 {
		if err := s.w.Flush(); err != nil {
			return nil, 0, false, err
		}
	}
	return io.NewSectionReader(s.f, e.off, e.size), e.size, true, nil
}

type spoolWriter struct {
	s   *spool
	off int64
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	n, err := w.s.w.Write(p)
	w.s.size += int64(n)
	return n, err
}

// commit records the blob written since begin under its hash.
func (w *spoolWriter) commit(h plumbing.Hash) error {
	w.s.blobs[h] = spoolEntry{off: w.off, size: w.s.size - w.off}
	return nil
}

// contentCache keeps recently resolved objects, by pack offset, within a
// byte budget: delta chains share bases.
type contentCache struct {
	budget, used int
	lru          *list.List
	items        map[int64]*list.Element
}

type cachedContent struct {
	offset int64
	typ    plumbing.ObjectType
	data   []byte
}

func newContentCache(budget int) *contentCache {
	return &contentCache{budget: budget, lru: list.New(), items: make(map[int64]*list.Element)}
}

func (c *contentCache) get(off int64) ([]byte, plumbing.ObjectType, bool) {
	e, ok := c.items[off]
	if !ok {
		return nil, 0, false
	}
	c.lru.MoveToFront(e)
	v := e.Value.(*cachedContent)
	return v.data, v.typ, true
}

func (c *contentCache) put(off int64, typ plumbing.ObjectType, data []byte) {
	if len(data) > c.budget/4 {
		return
	}
	if _, ok := c.items[off]; ok {
		return
	}
	c.items[off] = c.lru.PushFront(&cachedContent{offset: off, typ: typ, data: data})
	c.used += len(data)
	for c.used > c.budget {
		e := c.lru.Back()
		v := e.Value.(*cachedContent)
		c.lru.Remove(e)
		delete(c.items, v.offset)
		c.used -= len(v.data)
	}
}
