package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// TestSourceArchivesAreServedOnlyToTheirRun checks the source server: a
// run's pods get exactly the archive its status names, and nothing else is
// served.
func TestSourceArchivesAreServedOnlyToTheirRun(t *testing.T) {
	f := newRunFixture(t, "rt9")
	srv := httptest.NewServer(nil)
	defer srv.Close()
	sources := &Sources{Client: k8s, Git: gitClient, BaseURL: srv.URL, FetchImage: "ghcr.io/taugrid/tau:v0.1.0"}
	srv.Config.Handler = sources
	f.runRec.Sources = sources

	f.research.tag("run/with-source")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/with-source")
	queued := f.reconcileRun(t, run.Name, taugridv1.PhaseQueued)
	digest := queued.Status.SourceDigest
	if len(digest) != 64 {
		t.Fatalf("run status has no source digest: %+v", queued.Status)
	}
	job := f.jobs(t)[0]
	init := job.Spec.Template.Spec.InitContainers[0]
	url := strings.TrimPrefix(init.Command[2], "--url=")

	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(body)
	if resp.StatusCode != http.StatusOK || hex.EncodeToString(sum[:]) != digest {
		t.Fatalf("GET %s: %s, %d bytes with sha256 %x; want 200 and %s", url, resp.Status, len(body), sum, digest)
	}
	for name, path := range map[string]string{
		"another digest":   "/source/" + f.ns + "/" + run.Name + "/" + strings.Repeat("a", 64) + ".tar.gz",
		"no such run":      "/source/" + f.ns + "/nobody/" + digest + ".tar.gz",
		"another tenant":   "/source/rt1-a/" + run.Name + "/" + digest + ".tar.gz",
		"a path traversal": "/source/" + f.ns + "/../../etc/passwd",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: GET %s = %s, want 404", name, path, resp.Status)
		}
	}
}
