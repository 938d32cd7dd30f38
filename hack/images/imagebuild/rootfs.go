package imagebuild

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Host is where the build takes the files it does not compile: Debian's
// CA bundle and, for the node agent, glibc (the host's own for its
// architecture, Debian's cross packages for the other).
type Host struct {
	CABundle string // default /etc/ssl/certs/ca-certificates.crt
	// Root is prefixed to every host path (tests point it elsewhere).
	Root string
}

func (h Host) path(p string) string { return filepath.Join(h.Root, p) }

func (h Host) caBundle() string {
	if h.CABundle != "" {
		return h.CABundle
	}
	return h.path("/etc/ssl/certs/ca-certificates.crt")
}

// gnuTriple is the Debian multiarch name of arch.
func gnuTriple(arch string) string {
	if arch == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// glibcDir is where the host keeps arch's glibc, and the Debian package
// that put it there.
func (h Host) glibcDir(arch string) (dir, pkg string) {
	if arch == runtime.GOARCH {
		return h.path("/lib/" + gnuTriple(arch)), "libc6"
	}
	return h.path("/usr/" + gnuTriple(arch) + "/lib"), "libc6-" + arch + "-cross"
}

// glibcFiles: the loader and libc the node agent links, and the libraries
// libnvidia-ml.so.1 needs when it is loaded (stubs in glibc 2.34 and later).
var glibcFiles = []string{"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1"}

// loader is arch's dynamic loader: its file name, and the path binaries
// name as their interpreter.
func loader(arch string) (name, interp string) {
	if arch == "arm64" {
		return "ld-linux-aarch64.so.1", "/lib/ld-linux-aarch64.so.1"
	}
	return "ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2"
}

// baseTree is the root every image shares: users, CA bundle, /tmp, the
// user's home and the spec's directories.
func (h Host) baseTree(s Spec) (tree, error) {
	ca, err := os.ReadFile(h.caBundle())
	if err != nil {
		return nil, missing(err, "the CA bundle", "ca-certificates")
	}
	t := tree{}
	t.file("/etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)))
	t.file("/etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnogroup:x:65534:\nnonroot:x:%d:\n", GID)))
	t.file("/etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n"))
	t.file("/etc/ssl/certs/ca-certificates.crt", 0o644, ca)
	t.dir("/tmp", 0o1777, 0, 0)
	t.dir("/root", 0o700, 0, 0)
	t.dir("/home/nonroot", 0o700, UID, GID)
	for _, d := range s.Dirs {
		t.dir(d, 0o755, UID, GID)
	}
	h.copyright(t, "ca-certificates")
	return t, nil
}

// glibcTree adds arch's glibc at Debian's paths, with Debian's merged /usr
// links, so the binary's interpreter and libnvidia-ml.so.1's needs resolve.
func (h Host) glibcTree(t tree, arch string) (pkg string, err error) {
	dir, pkg := h.glibcDir(arch)
	name, interp := loader(arch)
	lib := "/usr/lib/" + gnuTriple(arch)
	for _, f := range append([]string{name}, glibcFiles...) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", missing(err, arch+" glibc", pkg)
		}
		t.file(lib+"/"+f, 0o755, b)
	}
	t.symlink("/lib", "usr/lib")
	if arch == "amd64" {
		t.symlink("/lib64", "usr/lib64")
		t.symlink("/usr/lib64/"+name, "../lib/"+gnuTriple(arch)+"/"+name)
	} else {
		t.symlink("/usr"+interp, gnuTriple(arch)+"/"+name)
	}
	h.copyright(t, pkg)
	return pkg, nil
}

// copyright adds a Debian package's copyright file, which its licence
// asks to travel with its files.
func (h Host) copyright(t tree, pkg string) {
	p := "/usr/share/doc/" + pkg + "/copyright"
	if b, err := os.ReadFile(h.path(p)); err == nil {
		t.file(p, 0o644, b)
	}
}

// missing says which Debian package provides what a build could not read.
func missing(err error, what, pkg string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is missing (%w): apt-get install %s, or run make image-deps", what, err, strings.TrimSpace(pkg))
	}
	return fmt.Errorf("reading %s: %w", what, err)
}
