package main

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
)

// wineLoader finds Wine's 64-bit loader: wine64 or wine on PATH (Debian's
// wine package), or /usr/lib/wine/wine64, where Debian's wine64 package
// alone puts it. Outside CI a missing Wine skips the test; in CI
// (CI=true) it fails it, as .ci/run installs one.
func wineLoader(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"wine64", "wine", "/usr/lib/wine/wine64"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	unavailable(t, "no wine64 on PATH or in /usr/lib/wine; CI must install it (apt-get install wine64)")
	return ""
}

// unavailable fails the test under CI=true and skips it elsewhere.
func unavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// wine runs Windows programs in a prefix of the test's own, quietly and
// with no Mono or Gecko installer prompt on its first start.
type wine struct {
	loader, prefix string
}

func newWine(t *testing.T) *wine {
	t.Helper()
	w := &wine{loader: wineLoader(t), prefix: t.TempDir()}
	// Registered after the prefix, so it runs before the prefix is
	// removed: the wine server may still be writing the registry.
	t.Cleanup(func() { _ = w.command(context.Background(), "", w.server(), "-k").Run() }) // none left to stop is fine
	return w
}

// server is the wineserver beside the loader, or on PATH.
func (w *wine) server() string {
	for _, name := range []string{filepath.Join(filepath.Dir(w.loader), "wineserver"), "wineserver"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return "wineserver"
}

func (w *wine) command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WINEPREFIX="+w.prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=", "DISPLAY=")
	return cmd
}

// run runs exe with args in dir and returns its stdout and stderr. The
// first run in a prefix creates it (wineboot), which takes a while.
func (w *wine) run(t *testing.T, dir, exe string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := w.command(ctx, dir, w.loader, append([]string{exe}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("wine %s %v: no answer in 3 minutes\n%s", filepath.Base(exe), args, stderr.String())
	}
	return stdout.String(), stderr.String(), err
}

// installProcessPrng builds testdata/wine's bcryptprimitives.dll with
// mingw-w64 into the prefix's system32, where Go's runtime loads it from:
// ProcessPrng over RtlGenRandom, for a Wine older than 8.13.
func (w *wine) installProcessPrng(t *testing.T) {
	t.Helper()
	cc, err := exec.LookPath("x86_64-w64-mingw32-gcc")
	if err != nil {
		unavailable(t, "this Wine has no bcryptprimitives.dll, which Windows programs of Go 1.22 and later need, and there is no x86_64-w64-mingw32-gcc to build its stand-in: install Wine 9.0 or later, or gcc-mingw-w64-x86-64-win32")
	}
	src, err := filepath.Abs("hack/release/testdata/wine")
	if err != nil {
		t.Fatal(err)
	}
	system32 := filepath.Join(w.prefix, "drive_c", "windows", "system32")
	if _, err := os.Stat(system32); err != nil {
		t.Fatalf("the Wine prefix has no system32 after a first start: %v", err)
	}
	// No C runtime: the DLL is one function over advapi32.
	build := exec.Command(cc, "-O2", "-shared", "-nostdlib", "-Wl,--entry,0",
		"-o", filepath.Join(system32, "bcryptprimitives.dll"),
		filepath.Join(src, "bcryptprimitives.c"), filepath.Join(src, "bcryptprimitives.def"),
		"-ladvapi32")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
}

// extract writes name from the zip archive at path into dir.
func extract(t *testing.T, path, name, dir string) string {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	f, err := z.Open(name)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if err := os.WriteFile(out, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// The Windows tau.exe of the release's zip runs under Wine: it says its
// version, validates the example research repository, and reports a
// broken tau.yaml with its file, line and column.
func TestTheWindowsTauRunsUnderWine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tau for Windows and starts Wine; run without -short")
	}
	w := newWine(t)
	t.Chdir("../..")
	dist := t.TempDir()
	key, err := imagebuild.DevelopmentKey(filepath.Join(t.TempDir(), "release.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := run(testVersion, dist, []string{"windows/amd64"}, key); err != nil {
		t.Fatal(err)
	}
	exe := extract(t, filepath.Join(dist, "tau_"+testVersion+"_windows_amd64.zip"), "tau.exe", t.TempDir())

	start := time.Now()
	out, stderr, err := w.run(t, t.TempDir(), exe, "version")
	if strings.Contains(stderr, "bcryptprimitives.dll not found") {
		// Go's runtime (1.22 and later) needs ProcessPrng from
		// bcryptprimitives.dll, which Wine has from 8.13 (stable: 9.0);
		// Debian 12's wine64 is 8.0. The prefix gets a stand-in for
		// that one DLL, and tau.exe starts again.
		w.installProcessPrng(t)
		t.Logf("this Wine has no bcryptprimitives.dll: its prefix has the stand-in from testdata/wine")
		out, stderr, err = w.run(t, t.TempDir(), exe, "version")
	}
	if err != nil || !strings.HasPrefix(out, "tau "+testVersion) {
		t.Fatalf("tau.exe version: %v\n%s%s", err, out, stderr)
	}
	t.Logf("tau.exe version (starting Wine) took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))

	examples, err := filepath.Abs("examples")
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err = w.run(t, examples, exe, "validate", "--dir", "research")
	if err != nil {
		t.Fatalf("tau.exe validate --dir research: %v\n%s%s", err, out, stderr)
	}
	for _, f := range []string{"tau.yaml", "ddp.yaml", "ray.yaml"} {
		if !strings.Contains(out, f+": valid") {
			t.Errorf("tau.exe validate says nothing of %s:\n%s", f, out)
		}
	}

	broken := t.TempDir()
	yaml, err := os.ReadFile(filepath.Join(examples, "research", "tau.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(yaml), "  cpu: \"8\"\n", "  cpu: 0\n", 1)
	if bad == string(yaml) {
		t.Fatal("the example's tau.yaml asks for no 8 CPUs to break")
	}
	if err := os.WriteFile(filepath.Join(broken, "tau.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = w.run(t, broken, exe, "validate")
	located := regexp.MustCompile(`(?m)^tau\.yaml:12:8: compute\.cpu: must be positive, got 0\r?$`)
	if err == nil || !located.MatchString(stderr) {
		t.Errorf("tau.exe validate of a tau.yaml with cpu: 0: %v, want tau.yaml:12:8: compute.cpu: must be positive\n%s%s", err, out, stderr)
	}
}
