package evidence

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type liveRuns map[string]*Live

func (l liveRuns) LiveRun(_ context.Context, ns, name string) (*Live, error) {
	return l[ns+"/"+name], nil
}

func at(min int) metav1.Time { return metav1.NewTime(sealTime.Add(time.Duration(min) * time.Minute)) }

// liveRun is a run that waited 12 minutes in the queue and succeeded.
func liveRun(name string, phase taugridv1.RunPhase) *taugridv1.TauRun {
	start, end := at(13), at(40)
	r := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: strings.Repeat("a", 40), Target: "default",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunTag, Ref: "refs/tags/run/lr-sweep", Requester: "Ada <ada@example.com>"}},
		Status: taugridv1.TauRunStatus{Phase: phase, Message: "finished; pushed with ghp_" + strings.Repeat("Z", 36),
			TauFile: "tau.yaml", ConfigDigest: "sha256:1111", PolicyCommit: strings.Repeat("b", 40), PolicyDigest: "sha256:2222",
			Phases: []taugridv1.PhaseTransition{{Phase: "Pending", Time: at(0)}, {Phase: "Queued", Time: at(1)},
				{Phase: "Admitted", Time: at(13)}, {Phase: "Running", Time: at(14)}},
			Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: name + "-1", Queue: "runs",
				Reason: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 1 more needed"},
			Attempts: []taugridv1.Attempt{{Number: 1, Workload: name + "-1", StartTime: &start}}}}
	if phase == taugridv1.PhaseSucceeded {
		r.Status.Phases = append(r.Status.Phases, taugridv1.PhaseTransition{Phase: "Succeeded", Time: at(40)})
		r.Status.Attempts[0].EndTime = &end
	}
	if phase == taugridv1.PhaseQueued {
		r.Status.Phases = r.Status.Phases[:2]
	}
	return r
}

func pageServer(t testing.TB, runs liveRuns) (*httptest.Server, Store) {
	t.Helper()
	st, _ := NewFileStore(t.TempDir())
	key := Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1}
	signer, _ := testAttestationKey(t)
	sealed, err := exampleBundle(t, key, "epoch 1 loss 0.31\nepoch 2 loss 0.12\ndone, HF_TOKEN=****\n").Seal(sealTime)
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Attestation, err = Attest(context.Background(), sealed, signer); err != nil {
		t.Fatal(err)
	}
	if err := Write(context.Background(), st, sealed); err != nil {
		t.Fatal(err)
	}
	s := &Server{Store: st, Runs: runs, Now: func() time.Time { return sealTime.Add(41 * time.Minute) },
		Links: testLinks, Tokens: teamTokens, PublicKey: signer}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, st
}

func get(t testing.TB, url, accept string) (int, string, http.Header) {
	t.Helper()
	return getAs(t, url, accept, teamAToken)
}

// getAs GETs url with token as the bearer token ("" sends none).
func getAs(t testing.TB, url, accept, token string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func TestThePageShowsStatusTimelineAndKueueWaitAsHTMLAndJSON(t *testing.T) {
	live := &Live{Run: liveRun("research-1a2b", taugridv1.PhaseSucceeded), RepositoryURL: "https://bot:pat@github.com/acme/research.git"}
	srv, _ := pageServer(t, liveRuns{"team-a/research-1a2b": live})
	code, html, h := get(t, srv.URL+"/runs/team-a/research-1a2b", "")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET page = %d %s", code, h.Get("Content-Type"))
	}
	for _, want := range []string{
		`id="status" class="badge phase-succeeded">Succeeded<`,
		`href="https://github.com/acme/research/commit/` + strings.Repeat("a", 40) + `"`,
		"Waited 12m 0s in queue runs before Kueue admitted it.",
		"epoch 2 loss 0.12", "Attempt 1", "sha256:", `href="/runs/team-a/research-1a2b/blobs/`, ">manifests.yaml</a>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(html, `class="timeline-row"`); n != 5 {
		t.Errorf("%d timeline rows, want 5", n)
	}
	for _, secret := range []string{"ghp_ZZZZ", "bot:pat", "pat@"} {
		if strings.Contains(html, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}

	for _, url := range []string{srv.URL + "/runs/team-a/research-1a2b.json", srv.URL + "/runs/team-a/research-1a2b"} {
		code, body, _ := get(t, url, "application/json")
		var v View
		if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil {
			t.Fatalf("GET %s as JSON = %d, %v", url, code, err)
		}
		if v.SchemaVersion != 1 || v.Phase != "Succeeded" || len(v.Timeline) != 5 || v.Wait == nil || v.Wait.Seconds != 720 ||
			len(v.Bundles) != 1 || len(v.Attempts) != 1 || !v.Attempts[0].Sealed {
			t.Errorf("JSON view = %+v", v)
		}
		if strings.Contains(body, "ghp_ZZZZ") || strings.Contains(body, "bot:pat") {
			t.Error("the JSON shows a secret")
		}
	}
}

func TestAQueuedRunsPageExplainsKueuesReason(t *testing.T) {
	srv, _ := pageServer(t, liveRuns{"team-a/research-9z": {Run: liveRun("research-9z", taugridv1.PhaseQueued)}})
	_, html, _ := get(t, srv.URL+"/runs/team-a/research-9z", "")
	for _, want := range []string{"Waiting in queue runs for 40m 0s.", "it needs 1 more nvidia.com/gpu in flavor h200", "so far"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestAGoneRunIsServedFromItsSealedEvidenceAndTheRestIsNotFound(t *testing.T) {
	srv, st := pageServer(t, liveRuns{})
	code, html, _ := get(t, srv.URL+"/runs/team-a/research-1a2b", "")
	if code != http.StatusOK || !strings.Contains(html, "from sealed evidence only") {
		t.Errorf("a gone run's page = %d", code)
	}
	for _, p := range []string{"/runs/team-a/nobody", "/runs/team-a/Team_A", "/runs/team-a/research-1a2b/blobs/" + strings.Repeat("0", 64), "/runs/team-a/research-1a2b/bundles/7.json"} {
		if code, _, _ := get(t, srv.URL+p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, code)
		}
	}
	m, _, _ := Load(context.Background(), st, Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1})
	if code, _, _ := get(t, srv.URL+"/runs/team-a/research-1a2b/blobs/"+m.Artifacts[0].SHA256, ""); code != http.StatusOK {
		t.Errorf("GET a blob of the run = %d", code)
	}
	if code, _, _ := get(t, srv.URL+"/runs/team-a/other/blobs/"+m.Artifacts[0].SHA256, ""); code != http.StatusNotFound {
		t.Errorf("GET the blob through another run = %d, want 404", code)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/runs/team-a/research-1a2b", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %v %v, want 405", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
}
