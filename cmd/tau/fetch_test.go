package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type entry struct {
	name, body, link string
	dir              bool
}

func archive(t *testing.T, entries ...entry) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.dir:
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:])
}

func serve(t *testing.T, body []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFetchSourceUnpacksAVerifiedArchive(t *testing.T) {
	body, sum := archive(t, entry{name: "src/", dir: true}, entry{name: "src/train.py", body: "print(1)\n"}, entry{name: "tau.yaml", body: "schema_version: 1\n"})
	dest := filepath.Join(t.TempDir(), "source")
	n, err := fetchSource(context.Background(), &fetchOptions{URL: serve(t, body), SHA256: sum, Dest: dest, Timeout: time.Minute})
	if err != nil || n != 3 {
		t.Fatalf("fetchSource = %d, %v; want 3 entries", n, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "src/train.py")); string(got) != "print(1)\n" {
		t.Errorf("src/train.py = %q", got)
	}
}

func TestFetchSourceRefusesATamperedArchiveAndWritesNothing(t *testing.T) {
	body, _ := archive(t, entry{name: "train.py", body: "evil\n"})
	dest := filepath.Join(t.TempDir(), "source")
	_, err := fetchSource(context.Background(), &fetchOptions{URL: serve(t, body), SHA256: strings.Repeat("0", 64), Dest: dest, Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "refusing to unpack") {
		t.Fatalf("err = %v, want a digest mismatch", err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("the destination exists after a refused archive: %v", err)
	}
}

func TestFetchSourceKeepsEveryEntryInsideTheDestination(t *testing.T) {
	outside := t.TempDir()
	body, sum := archive(t,
		entry{name: "escape", link: outside},
		entry{name: "escape/pwned", body: "x"},
	)
	dest := filepath.Join(t.TempDir(), "source")
	_, err := fetchSource(context.Background(), &fetchOptions{URL: serve(t, body), SHA256: sum, Dest: dest, Timeout: time.Minute})
	if err == nil {
		t.Error("an entry written through a symlink pointing outside was accepted")
	}
	if _, statErr := os.Stat(filepath.Join(outside, "pwned")); !os.IsNotExist(statErr) {
		t.Fatal("a file was written outside the destination")
	}
	body, sum = archive(t, entry{name: "../up", body: "x"})
	if _, err := fetchSource(context.Background(), &fetchOptions{URL: serve(t, body), SHA256: sum, Dest: dest, Timeout: time.Minute}); err == nil {
		t.Error("an entry named ../up was accepted")
	}
}

// On success the init container writes all it printed to its termination
// message as well, so the pod's status holds its whole log and the
// sealer reads none from the kubelet; on failure it writes nothing there
// (the sealer then reads the log), and output longer than the kubelet
// keeps is not written in part.
func TestFetchSourceWritesWhatItPrintedAsItsTerminationMessage(t *testing.T) {
	body, sum := archive(t, entry{name: "train.py", body: "print(1)\n"})
	url := serve(t, body)
	t.Run("success", func(t *testing.T) {
		msg := filepath.Join(t.TempDir(), "termination-log")
		out, _, err := tau(t, "fetch-source", "--url="+url, "--sha256="+sum, "--dest="+filepath.Join(t.TempDir(), "src"), "--termination-log="+msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(msg)
		if err != nil || string(got) != out || !strings.HasPrefix(out, "unpacked 1 entries of "+sum) {
			t.Errorf("termination message %q (%v), printed %q: want the same, naming the archive", got, err, out)
		}
	})
	t.Run("failure", func(t *testing.T) {
		msg := filepath.Join(t.TempDir(), "termination-log")
		if err := os.WriteFile(msg, nil, 0o644); err != nil { // the kubelet's empty file
			t.Fatal(err)
		}
		if _, _, err := tau(t, "fetch-source", "--url="+url, "--sha256="+strings.Repeat("0", 64), "--dest="+filepath.Join(t.TempDir(), "src"), "--termination-log="+msg); err == nil {
			t.Fatal("a tampered archive was accepted")
		}
		if got, _ := os.ReadFile(msg); len(got) != 0 {
			t.Errorf("a failed fetch wrote the termination message %q, want none", got)
		}
	})
	t.Run("too long to keep whole", func(t *testing.T) {
		msg := filepath.Join(t.TempDir(), "termination-log")
		writeTerminationLog(msg, bytes.Repeat([]byte("x"), maxTerminationMessage+1), io.Discard)
		if _, err := os.Stat(msg); !os.IsNotExist(err) {
			t.Errorf("output over the kubelet's %d bytes was written: %v", maxTerminationMessage, err)
		}
	})
	t.Run("unwritable", func(t *testing.T) {
		_, stderr, err := tau(t, "fetch-source", "--url="+url, "--sha256="+sum, "--dest="+filepath.Join(t.TempDir(), "src"),
			"--termination-log="+filepath.Join(t.TempDir(), "no", "such", "dir"))
		if err != nil {
			t.Errorf("an unwritable termination message failed the fetch: %v", err)
		}
		if !strings.Contains(stderr, "not writing the termination message") {
			t.Errorf("stderr %q, want it to say the message was not written", stderr)
		}
	})
}
