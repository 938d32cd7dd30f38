// Command release writes the tau CLI's release into a directory: for each
// platform an archive (.tar.gz; .zip for Windows) holding tau and the
// licence and an SPDX SBOM of the archive (tau_<version>_<os>_<arch>.spdx.json:
// the Go modules linked into tau); SHA256SUMS over the archives and SBOMs;
// its signature SHA256SUMS.sig and the public key cosign.pub, which cosign
// verify-blob checks offline; and the installers install.sh (Linux, macOS)
// and install.ps1 (Windows). The archives and SBOMs are reproducible: the
// binaries are built with -trimpath and no build ID, every file in an
// archive carries the commit's time, owner 0 and a fixed mode, and the SBOM
// is dated by the commit, so two builds of one commit give the same bytes
// and the same SHA256SUMS (the signature differs: ECDSA signs with a
// random nonce).
//
//	go run ./hack/release -version v1.2.3 -out dist [-key release.key]
//
// The key is -key, else $TAU_RELEASE_SIGNING_KEY, else
// $TAU_IMAGE_SIGNING_KEY (the release signs the CLI with the images' key),
// else a development key made at build/release/development-signing.key.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/ecdsa"
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

// DevelopmentKey is where a release without a key makes (and then reuses)
// its development signing key: under /build/, which git ignores.
const DevelopmentKey = "build/release/development-signing.key"

func main() {
	version := flag.String("version", "", "the release's version, as tau version prints it (v1.2.3)")
	out := flag.String("out", "dist", "directory to write the release into")
	platforms := flag.String("platforms", strings.Join(Platforms, ","), "comma-separated GOOS/GOARCH pairs")
	keyFile := flag.String("key", cmp.Or(os.Getenv("TAU_RELEASE_SIGNING_KEY"), os.Getenv("TAU_IMAGE_SIGNING_KEY")),
		"ECDSA P-256 key (PEM) that signs SHA256SUMS; default $TAU_RELEASE_SIGNING_KEY, else $TAU_IMAGE_SIGNING_KEY, else a development key at "+DevelopmentKey)
	flag.Parse()
	key, err := signingKey(*keyFile, DevelopmentKey, os.Stderr)
	if err == nil {
		err = run(*version, *out, strings.Split(*platforms, ","), key)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// commit is the commit being released and its time, which every file
// time and the SBOMs' creation time are.
type commit struct {
	rev, date string // date: RFC 3339, as tau version prints it
	time      time.Time
}

func run(version, out string, platforms []string, key *ecdsa.PrivateKey) error {
	if version == "" {
		return fmt.Errorf("-version is required")
	}
	c, err := readCommit()
	if err != nil {
		return err
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
		lines, err := releasePlatform(version, out, p, c, license)
		if err != nil {
			return err
		}
		sums = append(sums, lines...)
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := sign(out, key); err != nil {
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

func readCommit() (commit, error) {
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return commit{}, err
	}
	date, err := git("log", "-1", "--format=%cI")
	if err != nil {
		return commit{}, err
	}
	t, err := time.Parse(time.RFC3339, date)
	if err != nil {
		return commit{}, fmt.Errorf("the commit's date %q: %w", date, err)
	}
	return commit{rev: rev, date: date, time: t.UTC()}, nil
}

// releasePlatform builds tau for p and writes its archive and the
// archive's SBOM into out; it returns their SHA256SUMS lines.
func releasePlatform(version, out, p string, c commit, license []byte) ([]string, error) {
	goos, goarch, ok := strings.Cut(p, "/")
	if !ok || !slices.Contains(Platforms, p) {
		return nil, fmt.Errorf("platform %q: want one of %s", p, strings.Join(Platforms, ", "))
	}
	bin, err := build(version, c.rev, c.date, goos, goarch)
	if err != nil {
		return nil, err
	}
	name, data, err := archive(version, goos, goarch, bin, license, c.time)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
		return nil, err
	}
	sbomName, doc, err := archiveSBOM(version, name, data, bin, c.time)
	if err != nil {
		return nil, fmt.Errorf("the SBOM of %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(out, sbomName), doc, 0o644); err != nil {
		return nil, err
	}
	fmt.Printf("%s/%s: %s, tau %d bytes, archive %d bytes, SBOM %d bytes\n", out, name, p, len(bin), len(data), len(doc))
	return []string{sumLine(name, data), sumLine(sbomName, doc)}, nil
}

func sumLine(name string, data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]) + "  " + name
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
