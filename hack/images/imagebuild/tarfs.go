package imagebuild

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// entry is one file, directory or symlink of a layer.
type entry struct {
	mode     fs.FileMode // permission bits; fs.ModeDir or fs.ModeSymlink for those
	uid, gid int
	body     []byte
	link     string
}

// tree is a layer's files by absolute path. Its tar lists parents before
// children and everything in byte order, with one fixed time, so the same
// tree always gives the same bytes.
type tree map[string]entry

// dir adds a directory; mode is Unix bits, 0o1000 the sticky bit.
func (t tree) dir(p string, mode fs.FileMode, uid, gid int) {
	if mode&0o1000 != 0 {
		mode = mode.Perm() | fs.ModeSticky
	}
	t[path.Clean(p)] = entry{mode: fs.ModeDir | mode, uid: uid, gid: gid}
}

func (t tree) file(p string, mode fs.FileMode, body []byte) {
	t[path.Clean(p)] = entry{mode: mode, body: body}
}

func (t tree) symlink(p, target string) {
	t[path.Clean(p)] = entry{mode: fs.ModeSymlink | 0o777, link: target}
}

// addParents gives every path its parent directories (root-owned, 0755)
// where the tree names none.
func (t tree) addParents() {
	for p := range t {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := t[d]; !ok {
				t.dir(d, 0o755, 0, 0)
			}
		}
	}
}

// tar writes the tree with every time set to mtime.
func (t tree) tar(mtime time.Time) ([]byte, error) {
	t.addParents()
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := w.WriteHeader(t.header(p, mtime)); err != nil {
			return nil, err
		}
		if _, err := w.Write(t[p].body); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (t tree) header(p string, mtime time.Time) *tar.Header {
	e := t[p]
	h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: int64(e.mode.Perm()),
		Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
	if e.mode&fs.ModeSticky != 0 {
		h.Mode = int64(e.mode.Perm()) | 0o1000
	}
	switch {
	case e.mode.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
	case e.mode&fs.ModeSymlink != 0:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
	default:
		h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
	}
	return h
}
