package evidence

import (
	"bytes"
	"io"
	"regexp"
	"strings"
)

// maxMaskLine is the longest line masked whole. A longer line (a progress
// bar that never ends its line, a base64 dump) is masked in pieces, each
// cut where no secret can straddle it.
const maxMaskLine = 64 << 10

// minHoldBack is held back of a long line even when the masker knows no
// secret values: token patterns and keyed values are shorter than this.
const minHoldBack = 512

var (
	keyBegin = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)
	keyEnd   = regexp.MustCompile(`-----END [A-Z ]*PRIVATE KEY-----`)
)

// MaskWriter masks a stream: what is written to it reaches the underlying
// writer masked, whatever the chunking. Complete lines (ended by \n, or
// by the \r of a progress bar) pass at once, so a followed log stays live; a partial line is held until its end, or, past
// 64 KiB, all but its last bytes (as many as the longest form of a secret)
// pass. A private key block spread over lines is masked line by line until
// its END line. Close flushes what is held.
type MaskWriter struct {
	m     *Masker
	w     io.Writer
	buf   []byte
	inKey bool // inside a private key block whose END has not come
	err   error
}

// NewWriter returns a MaskWriter writing to w.
func (m *Masker) NewWriter(w io.Writer) *MaskWriter { return &MaskWriter{m: m, w: w} }

// Write implements io.Writer. It reports len(p) written unless the
// underlying writer failed.
func (mw *MaskWriter) Write(p []byte) (int, error) {
	if mw.err != nil {
		return 0, mw.err
	}
	mw.buf = append(mw.buf, p...)
	for {
		i := bytes.IndexAny(mw.buf, "\r\n") // a progress bar's \r ends its line too
		if i < 0 {
			break
		}
		mw.emitLine(mw.buf[:i+1])
		mw.buf = mw.buf[i+1:]
	}
	for len(mw.buf) > maxMaskLine {
		cut := mw.safeCut(len(mw.buf) - mw.holdBack())
		mw.emitLine(mw.buf[:cut])
		mw.buf = mw.buf[cut:]
	}
	mw.buf = compact(mw.buf)
	if mw.err != nil {
		return 0, mw.err
	}
	return len(p), nil
}

// Close masks and writes what is held back. It does not close the
// underlying writer.
func (mw *MaskWriter) Close() error {
	if len(mw.buf) > 0 {
		mw.emitLine(mw.buf)
		mw.buf = nil
	}
	return mw.err
}

func (mw *MaskWriter) holdBack() int {
	n := minHoldBack
	if mw.m != nil {
		n = max(n, mw.m.maxLen)
	}
	return n
}

// safeCut moves cut back to the start of any secret form, token or keyed
// value that crosses it, so neither half escapes masking.
func (mw *MaskWriter) safeCut(cut int) int {
	for moved := true; moved && cut > 0; {
		moved = false
		if mw.m != nil {
			for _, f := range mw.m.forms {
				if s := straddling(mw.buf, cut, f); s >= 0 {
					cut, moved = s, true
				}
			}
		}
		lo := max(0, cut-minHoldBack)
		window := mw.buf[lo:min(len(mw.buf), cut+minHoldBack)]
		for _, re := range streamPatterns() {
			for _, loc := range re.FindAllIndex(window, -1) {
				if lo+loc[0] < cut && lo+loc[1] > cut {
					cut, moved = lo+loc[0], true
				}
			}
		}
	}
	if cut == 0 { // one match longer than the hold-back: no secret is that long
		cut = len(mw.buf) - mw.holdBack()
	}
	return max(cut, 1)
}

// streamPatterns are the token patterns a cut must not split; key blocks
// are followed line by line instead.
func streamPatterns() []*regexp.Regexp {
	res := []*regexp.Regexp{keyedSecret}
	for _, p := range tokenPatterns {
		res = append(res, p.re)
	}
	return res
}

// straddling returns where an occurrence of f crossing cut starts, or -1.
func straddling(buf []byte, cut int, f string) int {
	from := max(0, cut-len(f)+1)
	to := min(len(buf), cut+len(f)-1)
	for off := from; off < to; {
		i := bytes.Index(buf[off:to], []byte(f))
		if i < 0 {
			return -1
		}
		if s := off + i; s < cut && s+len(f) > cut {
			return s
		}
		off += i + 1
	}
	return -1
}

// emitLine masks one line (or piece of a line) and writes it.
func (mw *MaskWriter) emitLine(line []byte) {
	if mw.err != nil || len(line) == 0 {
		return
	}
	s := string(line)
	if mw.inKey {
		s = mw.insideKey(s)
	} else if loc := keyBegin.FindStringIndex(s); loc != nil && !keyEnd.MatchString(s[loc[1]:]) {
		// A key block begins here and goes on past this line.
		s, mw.inKey = mw.m.Mask(s[:loc[0]])+Masked+lineEnd(s), true
	} else {
		s = mw.m.Mask(s)
	}
	if _, err := io.WriteString(mw.w, s); err != nil {
		mw.err = err
		return
	}
	if f, ok := mw.w.(interface{ Flush() }); ok && lineEnd(s) != "" {
		f.Flush()
	}
}

// insideKey masks a line of a private key block: all of it, up to its END
// line; a line that is plainly not part of a key ends the block.
func (mw *MaskWriter) insideKey(s string) string {
	if loc := keyEnd.FindStringIndex(s); loc != nil {
		mw.inKey = false
		return Masked + mw.m.Mask(s[loc[1]:])
	}
	if !keyLine(s) {
		mw.inKey = false
		return mw.m.Mask(s)
	}
	return Masked + lineEnd(s)
}

// keyLine: base64 text, a blank line or a PEM header ("Proc-Type: 4,ENCRYPTED").
func keyLine(s string) bool {
	t := strings.TrimSpace(s)
	if strings.Contains(t, ": ") {
		return true
	}
	return strings.Trim(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == ""
}

func lineEnd(s string) string {
	if strings.HasSuffix(s, "\r\n") {
		return "\r\n"
	}
	if n := len(s); n > 0 && (s[n-1] == '\n' || s[n-1] == '\r') {
		return s[n-1:]
	}
	return ""
}

// compact copies a small remainder to the front of a fresh slice, so a
// long stream does not keep its first buffer alive.
func compact(b []byte) []byte {
	if cap(b) > 4*maxMaskLine && len(b) < cap(b)/4 {
		return append([]byte(nil), b...)
	}
	return b
}
