package evidence

import (
	"bytes"
	"errors"
	"io"
)

// Log tail bounds. A container's log may be any size (10 GB is not
// unusual); the controller asks the API server for at most TailLines lines
// and ReadLimit bytes, reads no more than ReadLimit whatever it is sent,
// and keeps the last KeepBytes.
const (
	TailLines = 500
	ReadLimit = 256 << 10
	KeepBytes = 64 << 10
)

// ReadTail reads at most limit bytes from r and returns the last keep of
// them, and whether anything was dropped. Memory stays O(keep).
func ReadTail(r io.Reader, limit, keep int64) ([]byte, bool, error) {
	ring := make([]byte, keep)
	var n int64 // bytes read
	buf := make([]byte, 32<<10)
	lr := io.LimitReader(r, limit+1)
	for {
		k, err := lr.Read(buf)
		for _, b := range buf[:k] {
			ring[n%keep] = b
			n++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	truncated := n > keep
	if !truncated {
		return ring[:n], false, nil
	}
	start := n % keep
	out := append(append([]byte(nil), ring[start:]...), ring[:start]...)
	// Start at a line boundary when one is near: half a line misleads.
	if i := bytes.IndexByte(out[:min(len(out), 4096)], '\n'); i >= 0 {
		out = out[i+1:]
	}
	return out, true, nil
}

// Tail reads the bounded tail of a container's log, masks it and scans it
// for metrics records: what a bundle keeps of one log.
func Tail(r io.Reader, m *Masker, metrics *Metrics) ([]byte, bool, error) {
	data, truncated, err := ReadTail(r, ReadLimit, KeepBytes)
	data = m.MaskBytes(data)
	metrics.ScanMetrics(data)
	return data, truncated, err
}
