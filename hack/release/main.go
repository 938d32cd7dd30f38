// Command release writes the tau CLI's release into a directory: for each
// platform an archive (.tar.gz; .zip for Windows) holding tau and the
// licence, SHA256SUMS over the archives, and the installers install.sh
// (Linux, macOS) and install.ps1 (Windows). The archives are reproducible:
// the binaries are built with -trimpath and no build ID, and every file in
// an archive carries the commit's time, owner 0 and a fixed mode, so two
// builds of one commit give the same bytes.
//
//	go run ./hack/release -version v1.2.3 -out dist
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Platforms are the CLI's release platforms, GOOS/GOARCH.
var Platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

func main() {
	version := flag.String("version", "", "the release's version, as tau version prints it (v1.2.3)")
	out := flag.String("out", "dist", "directory to write the release into")
	platforms := flag.String("platforms", strings.Join(Platforms, ","), "comma-separated GOOS/GOARCH pairs")
	flag.Parse()
	if err := run(*version, *out, strings.Split(*platforms, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(version, out string, platforms []string) error {
	if version == "" {
		return fmt.Errorf("-version is required")
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		return err
	}
	when, err := git("log", "-1", "--format=%cI")
	if err != nil {
		return err
	}
	mtime, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return fmt.Errorf("the commit's date %q: %w", when, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	license, err := os.ReadFile("LICENSE")
	if err != nil {
		return err
	}
	var sums []string
	platforms = slices.Sorted(slices.Values(platforms)) // SHA256SUMS in the archives' order: tau_<version>_<os>_<arch>
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || !slices.Contains(Platforms, p) {
			return fmt.Errorf("platform %q: want one of %s", p, strings.Join(Platforms, ", "))
		}
		bin, err := build(version, commit, when, goos, goarch)
		if err != nil {
			return err
		}
		name, data, err := archive(version, goos, goarch, bin, license, mtime.UTC())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		sums = append(sums, hex.EncodeToString(sum[:])+"  "+name)
		fmt.Printf("%s/%s: %s, tau %d bytes, archive %d bytes\n", out, name, p, len(bin), len(data))
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	for _, f := range []string{"install.sh", "install.ps1"} {
		data, err := os.ReadFile(filepath.Join("hack", "release", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, f), data, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func git(args ...string) (string, error) {
	b, err := exec.Command("git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// build compiles tau for one platform, reproducibly.
func build(version, commit, date, goos, goarch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "tau-release-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "tau")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s -X main.date=%s", version, commit, date),
		"-o", bin, "./cmd/tau")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building tau for %s/%s: %w", goos, goarch, err)
	}
	return os.ReadFile(bin)
}

// archive packs tau and the licence: tau_<version>_<os>_<arch>.tar.gz, or
// .zip with tau.exe for Windows.
func archive(version, goos, goarch string, bin, license []byte, mtime time.Time) (string, []byte, error) {
	base := fmt.Sprintf("tau_%s_%s_%s", version, goos, goarch)
	var buf bytes.Buffer
	if goos == "windows" {
		z := zip.NewWriter(&buf)
		for _, f := range []struct {
			name string
			data []byte
		}{{"tau.exe", bin}, {"LICENSE", license}} {
			w, err := z.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: mtime})
			if err != nil {
				return "", nil, err
			}
			if _, err := w.Write(f.data); err != nil {
				return "", nil, err
			}
		}
		if err := z.Close(); err != nil {
			return "", nil, err
		}
		return base + ".zip", buf.Bytes(), nil
	}
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"tau", 0o755, bin}, {"LICENSE", 0o644, license}} {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return "", nil, err
		}
		if _, err := io.Copy(tw, bytes.NewReader(f.data)); err != nil {
			return "", nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return "", nil, err
	}
	if err := gz.Close(); err != nil {
		return "", nil, err
	}
	return base + ".tar.gz", buf.Bytes(), nil
}
