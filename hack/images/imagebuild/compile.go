package imagebuild

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Source is the commit being built.
type Source struct {
	Dir      string    // the module root
	Revision string    // the commit
	Time     time.Time // SOURCE_DATE_EPOCH: every file and config time
	Dirty    bool      // the work tree differs from the commit
}

// ReadSource reads the commit of the work tree at dir. SOURCE_DATE_EPOCH,
// where set, wins over the commit time, as reproducible-builds.org asks.
func ReadSource(ctx context.Context, dir string) (Source, error) {
	out, err := git(ctx, dir, "log", "-1", "--format=%H %ct")
	if err != nil {
		return Source{}, err
	}
	rev, ct, _ := strings.Cut(strings.TrimSpace(out), " ")
	epoch := ct
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		epoch = e
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return Source{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", epoch)
	}
	status, err := git(ctx, dir, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return Source{}, err
	}
	return Source{Dir: dir, Revision: rev, Time: time.Unix(sec, 0).UTC(), Dirty: status != ""}, nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// compiled is one binary built for one platform.
type compiled struct {
	path string
	info *buildinfo.BuildInfo
}

// compile builds spec's binary for p into dir: -trimpath, no build ID,
// symbols stripped, and no VCS stamp: the go command stamps a git worktree
// and a clone of the same commit differently (seen: none in a worktree), so
// the commit is in the image's labels and provenance instead. A
// cgo binary for another architecture is built with Debian's cross gcc.
// A binary that says its version (tau version) is told the image's tag,
// the commit and the commit's time.
func compile(ctx context.Context, src Source, tag string, s Spec, p Platform, dir string) (*compiled, error) {
	out := filepath.Join(dir, p.OS+"-"+p.Arch, s.Name)
	ldflags := fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s -X main.date=%s",
		tag, src.Revision, src.Time.UTC().Format(time.RFC3339))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", out, s.Package)
	cmd.Dir = src.Dir
	cmd.Env = append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0", "GOFLAGS=")
	if s.CGO {
		cc, err := cCompiler(p.Arch)
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, "CGO_ENABLED=1", "CC="+cc, "CGO_CFLAGS=-O2 -Wno-deprecated-declarations")
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building %s for %s: %w\n%s", s.Package, p, err, stderr.String())
	}
	info, err := buildinfo.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("reading the build info of %s: %w", out, err)
	}
	return &compiled{path: out, info: info}, nil
}

// cCompiler is the gcc that builds for arch here.
func cCompiler(arch string) (string, error) {
	cc := "gcc"
	if arch != runtime.GOARCH {
		cc = gnuTriple(arch) + "-gcc"
	}
	pkgs := "gcc libc6-dev"
	if arch != runtime.GOARCH {
		pkgs = fmt.Sprintf("gcc-%s libc6-dev-%s-cross", gnuTriple(arch), arch)
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("the node agent links glibc through cgo and needs %s for %s: apt-get install %s, or run make image-deps", cc, arch, pkgs)
	}
	return cc, nil
}
