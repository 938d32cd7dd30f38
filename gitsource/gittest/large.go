package gittest

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
)

// LargeSpec shapes a generated repository: Files files in a two-level
// directory tree, then Commits-1 more commits that each rewrite one file
// with fresh incompressible text, so history packs to roughly
// Commits * AvgFileBytes * 0.77 bytes.
type LargeSpec struct {
	Commits      int
	Files        int
	AvgFileBytes int
	Seed         uint64
}

// Name identifies the generated repository, so a cache of them can be keyed
// by it.
func (s LargeSpec) Name() string {
	return fmt.Sprintf("large-c%d-f%d-b%d-s%d.git", s.Commits, s.Files, s.AvgFileBytes, s.Seed)
}

// GenerateLarge creates the bare repository dir with `git fast-import`,
// unless a complete one is already there. The tree also holds a tau.yaml,
// a tau/ray.yaml, an executable script and a symlink.
func GenerateLarge(env []string, dir string, spec LargeSpec) error {
	done := filepath.Join(dir, "generated")
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	_ = os.RemoveAll(dir)
	if err := InitBare(env, dir); err != nil {
		return err
	}
	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	werr := writeLarge(stdin, spec)
	cerr := stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git fast-import: %w", err)
	}
	if werr != nil || cerr != nil {
		return fmt.Errorf("writing fast-import stream: %w", errors.Join(werr, cerr))
	}
	return os.WriteFile(done, nil, 0o644)
}

func writeLarge(w io.Writer, spec LargeSpec) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	g := &largeGen{w: bw, rnd: rand.New(rand.NewChaCha8(seed32(spec.Seed))), spec: spec}
	g.first()
	for i := 1; i < spec.Commits; i++ {
		g.commit(i)
	}
	fmt.Fprintf(bw, "done\n")
	return bw.Flush()
}

func seed32(s uint64) [32]byte {
	var b [32]byte
	for i := range 8 {
		b[i] = byte(s >> (8 * i))
	}
	return b
}

type largeGen struct {
	w    *bufio.Writer
	rnd  *rand.Rand
	spec LargeSpec
	buf  []byte
}

func (g *largeGen) path(i int) string {
	return fmt.Sprintf("src/d%02d/e%02d/file%05d.txt", i%50, (i/50)%10, i)
}

func (g *largeGen) header(n int, msg string) {
	ts := 1767225600 + int64(n)*60
	fmt.Fprintf(g.w, "commit refs/heads/main\nauthor Alice <alice@example.com> %d +0000\ncommitter Alice <alice@example.com> %d +0000\n", ts, ts)
	fmt.Fprintf(g.w, "data %d\n%s\n", len(msg), msg)
}

func (g *largeGen) first() {
	g.header(0, "initial tree")
	for i := range g.spec.Files {
		g.file("100644", g.path(i), g.content())
	}
	g.file("100644", "tau.yaml", []byte("name: large\nimage: example.com/train:1\ncommand: [python, train.py]\n"))
	g.file("100644", "tau/ray.yaml", []byte("name: large-ray\nimage: example.com/ray:1\n"))
	g.file("100755", "scripts/run.sh", []byte("#!/bin/sh\nexec python train.py \"$@\"\n"))
	g.file("120000", "latest", []byte("src/d00/e00/file00000.txt"))
}

func (g *largeGen) commit(n int) {
	g.header(n, fmt.Sprintf("change %d", n))
	if n%1000 == 0 {
		g.file("100644", "tau.yaml", fmt.Appendf(nil, "name: large\nimage: example.com/train:%d\n", n))
		return
	}
	g.file("100644", g.path(g.rnd.IntN(g.spec.Files)), g.content())
}

func (g *largeGen) file(mode, path string, data []byte) {
	fmt.Fprintf(g.w, "M %s inline %s\ndata %d\n", mode, path, len(data))
	_, _ = g.w.Write(data) // bufio.Writer errors stick; Flush reports them
	_ = g.w.WriteByte('\n')
}

// content is random text of about AvgFileBytes, in lines of 76 characters.
func (g *largeGen) content() []byte {
	n := g.spec.AvgFileBytes/2 + g.rnd.IntN(g.spec.AvgFileBytes+1)
	raw := make([]byte, n*3/4)
	for i := range raw {
		raw[i] = byte(g.rnd.Uint32())
	}
	enc := base64.StdEncoding.EncodeToString(raw)
	g.buf = g.buf[:0]
	for len(enc) > 76 {
		g.buf = append(g.buf, enc[:76]...)
		g.buf = append(g.buf, '\n')
		enc = enc[76:]
	}
	g.buf = append(g.buf, enc...)
	g.buf = append(g.buf, '\n')
	return g.buf
}
