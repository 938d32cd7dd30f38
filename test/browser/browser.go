// Package browser runs the real Chromium, headless, for the tests that
// read TauGrid's pages as a person does: the evidence page and the team
// board.
package browser

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// Chromium finds a headless-capable browser. Outside CI a missing browser
// skips the test; in CI (CI=true) it fails it, as .ci/run installs one.
func Chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH; CI must install it (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install --no-install-recommends chromium)")
	return ""
}

// Browse runs headless chromium with a fresh profile and no network
// chatter, and returns what it printed (the DOM, with --dump-dom) and the
// messages the page wrote to its console.
func Browse(t *testing.T, bin string, args ...string) (stdout []byte, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--enable-logging=stderr", "--v=0",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1500", "--hide-scrollbars"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	for _, m := range consoleLine.FindAllSubmatch(stderr.Bytes(), -1) {
		console = append(console, string(m[1]))
	}
	return out, console
}

// consoleLine is how chromium logs a page's console message to stderr.
var consoleLine = regexp.MustCompile(`(?m)CONSOLE[(:]\d+\)?\] (.*)$`)

// Screenshot takes Chromium's screenshot of url into the test's artifact
// directory under name, and decodes it.
func Screenshot(t *testing.T, bin, url, name string) image.Image {
	t.Helper()
	shot := filepath.Join(t.ArtifactDir(), name)
	Browse(t, bin, "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%dx%d)", shot, img.Bounds().Dx(), img.Bounds().Dy())
	return img
}
