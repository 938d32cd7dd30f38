package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	spdxjson "github.com/spdx/tools-golang/json"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
)

const testVersion = "v0.0.0-test"

// release writes the release for this machine's platform and Windows
// amd64 into a new directory, from the repository's root.
func release(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	key, err := imagebuild.DevelopmentKey(filepath.Join(t.TempDir(), "release.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := run(testVersion, out, []string{runtime.GOOS + "/" + runtime.GOARCH, "windows/amd64"}, key); err != nil {
		t.Fatal(err)
	}
	return out
}

// installSh runs a release's install.sh against base, in a home of its
// own, with PATH holding only the tools it needs.
func installSh(t *testing.T, dist, base, dir string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command("sh", filepath.Join(dist, "install.sh"), "--version", testVersion, "--base-url", base, "--dir", dir)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if entries, _ := os.ReadDir(home); len(entries) > 0 {
		t.Errorf("install.sh wrote into the home directory: %v (a shell profile?)", entries)
	}
	return string(out), err
}

// A release is the same bytes when built twice; install.sh installs the
// archive for this machine from a server after checking it against
// SHA256SUMS, and leaves PATH and the shell's profile alone; it refuses an
// archive changed by one byte and installs nothing.
func TestAReleaseIsReproducibleAndInstallShChecksWhatItInstalls(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if _, err := exec.LookPath("wget"); err != nil {
			t.Fatal("install.sh needs curl or wget (.ci/run installs curl)")
		}
	}
	t.Chdir("../..")
	a, b := release(t), release(t)
	sumsA, err := os.ReadFile(filepath.Join(a, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sumsB, _ := os.ReadFile(filepath.Join(b, "SHA256SUMS"))
	if !bytes.Equal(sumsA, sumsB) {
		t.Fatalf("two builds of one commit differ:\n%s\n%s", sumsA, sumsB)
	}
	for _, want := range []string{"tau_" + testVersion + "_windows_amd64.zip", "tau_" + testVersion + "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"} {
		if !strings.Contains(string(sumsA), "  "+want+"\n") {
			t.Errorf("SHA256SUMS lists no %s:\n%s", want, sumsA)
		}
	}

	serve := func(dist string) string {
		mux := http.NewServeMux()
		mux.Handle("/"+testVersion+"/", http.StripPrefix("/"+testVersion+"/", http.FileServer(http.Dir(dist))))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	dir := filepath.Join(t.TempDir(), "bin")
	out, err := installSh(t, a, serve(a), dir)
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	if !strings.Contains(out, "installed tau "+testVersion+" into "+dir+"/tau") || !strings.Contains(out, dir+" is not on your PATH") {
		t.Errorf("install.sh said:\n%s", out)
	}
	v, err := exec.Command(filepath.Join(dir, "tau"), "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "tau "+testVersion+"\n") {
		t.Errorf("the installed tau version: %v\n%s", err, v)
	}

	archive := filepath.Join(b, "tau_"+testVersion+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(archive, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "bin")
	out, err = installSh(t, b, serve(b), dir)
	if err == nil || !strings.Contains(out, "does not match SHA256SUMS") || !strings.Contains(out, "nothing installed") {
		t.Errorf("install.sh of a corrupted archive: %v\n%s; want a refusal", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "tau")); !os.IsNotExist(err) {
		t.Errorf("a corrupted archive left %s/tau: %v", dir, err)
	}
}

// The real cosign verifies SHA256SUMS's signature offline with the
// release's cosign.pub and refuses a SHA256SUMS changed by one byte; each
// archive's SBOM is SPDX that spdx/tools-golang reads back, naming the
// archive's digest from SHA256SUMS and the modules linked into tau.
func TestCosignVerifiesTheChecksumsAndEachArchiveHasAnSBOM(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real cosign CLI; run without -short (make test builds it)")
	}
	cosign := os.Getenv("TAU_COSIGN")
	if cosign == "" {
		t.Fatal("TAU_COSIGN is not set: run make test, or make cosign and set TAU_COSIGN to the path it prints")
	}
	t.Chdir("../..")
	dist := release(t)
	verify := func() (string, error) {
		out, err := exec.Command(cosign, "verify-blob", "--key", filepath.Join(dist, "cosign.pub"),
			"--signature", filepath.Join(dist, "SHA256SUMS.sig"), "--insecure-ignore-tlog=true", filepath.Join(dist, "SHA256SUMS")).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil || !strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign verify-blob of SHA256SUMS: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	name := "tau_" + testVersion + "_windows_amd64"
	f, err := os.Open(filepath.Join(dist, name+".spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := spdxjson.Read(f)
	if err != nil {
		t.Fatalf("the SBOM is not SPDX JSON: %v", err)
	}
	var names []string
	var archiveSum string
	for _, p := range doc.Packages {
		names = append(names, p.PackageName)
		if p.PackageFileName == name+".zip" {
			for _, c := range p.PackageChecksums {
				archiveSum = c.Value
			}
		}
	}
	all := strings.Join(names, " ")
	for _, want := range []string{"github.com/spf13/cobra", "github.com/go-git/go-git/v5", "stdlib"} {
		if !strings.Contains(all, want) {
			t.Errorf("the SBOM names no %s: %s", want, all)
		}
	}
	if archiveSum == "" || !strings.Contains(string(sums), archiveSum+"  "+name+".zip\n") {
		t.Errorf("the SBOM's digest of %s.zip (%q) is not SHA256SUMS's:\n%s", name, archiveSum, sums)
	}
	sums[0] ^= 0x01
	if err := os.WriteFile(filepath.Join(dist, "SHA256SUMS"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(); err == nil {
		t.Errorf("cosign verified a changed SHA256SUMS:\n%s", out)
	}
}
