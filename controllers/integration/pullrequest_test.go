package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/gitsource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
)

// TestPullRequestHeadsThatChangeATauFileGetAValidationStatus pushes three
// pull request heads, as GitHub advertises them (refs/pull/<n>/head): one
// breaking tau.yaml, one changing tau/ray.yaml validly, one touching no tau
// file. Only the first two get a tau/validate status, once each.
func TestPullRequestHeadsThatChangeATauFileGetAValidationStatus(t *testing.T) {
	f := newForgeFixture(t, "rp1", forge.GitHub, forgeToken)
	f.repos.PullRequests = &repoctrl.PullRequests{Client: k8s, Git: gitClient, Policies: f.repos.Policies, Posters: f.r.Posters}
	setGPUQuota(t, f.ns, "8", "0") // the team's queue holds 8 GPUs at most
	main := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	push := func(n, file, old, new string) string {
		f.research.git("-C", f.research.work, "checkout", "--quiet", "-B", "pr"+n, main)
		if file != "" {
			f.research.edit(file, old, new)
		} else {
			f.research.write("NOTES.md", "no tau change\n")
		}
		f.research.git("-C", f.research.work, "add", "-A")
		f.research.git("-C", f.research.work, "commit", "--quiet", "-m", "pr "+n)
		f.research.git("-C", f.research.work, "push", "--quiet", "origin", "HEAD:refs/pull/"+n+"/head")
		return f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	}
	broken := push("1", "tau.yaml", "  gpus: 1\n", "  gpus: 99\n")
	valid := push("2", "tau/ray.yaml", "  workers: 2\n", "  workers: 1\n")
	push("3", "", "", "")
	tooBig := push("4", "tau/ray.yaml", "timeout: 12h", "timeout: 6h") // two 8-GPU workers: 16 GPUs
	f.poll(t)
	f.poll(t) // a second poll posts nothing again

	var got []forgetest.Call
	for _, c := range f.srv.Accepted() {
		if c.Context == repoctrl.ValidateContext {
			got = append(got, c)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d tau/validate statuses, want 3 (one per pull request that changes a tau file): %+v", len(got), got)
	}
	bySHA := map[string]forgetest.Call{}
	for _, c := range got {
		bySHA[c.SHA] = c
	}
	if c := bySHA[tooBig]; c.State != "failure" || !strings.Contains(c.Description, "tau/ray.yaml:11:20: compute.gpus_per_worker: the run asks 16 nvidia.com/gpu") {
		t.Errorf("too big a pull request: %+v, want failure: the queue could never hold it", c)
	}
	if c := bySHA[broken]; c.State != "failure" || !strings.Contains(c.Description, "tau.yaml:11:9: compute.gpus") {
		t.Errorf("broken pull request: %+v, want failure naming tau.yaml:11:9", c)
	}
	if c := bySHA[valid]; c.State != "success" || !strings.Contains(c.Description, "tau/ray.yaml valid") {
		t.Errorf("valid pull request: %+v, want success", c)
	}
	repo := f.repo.DeepCopy()
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.repo), repo); err != nil {
		t.Fatal(err)
	}
	if len(repo.Status.ValidatedHeads) != 4 {
		t.Errorf("validated heads = %v, want the four open pull requests' heads", repo.Status.ValidatedHeads)
	}
}

// pullsAPI serves Gitea's GET /api/v1/repos/{owner}/{repo}/pulls?state=open
// with open (an error answers 503), and hands every other request (status
// posts) to srv.
func pullsAPI(t *testing.T, srv http.Handler, token string, open func() ([]forge.PullRequest, error)) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/repos/{owner}/{repo}/pulls", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token "+token || r.URL.Query().Get("state") != "open" {
			http.Error(w, `{"message":"want a token and state=open"}`, http.StatusForbidden)
			return
		}
		listed, err := open()
		if err != nil {
			http.Error(w, fmt.Sprintf(`{"message":%q}`, err), http.StatusServiceUnavailable)
			return
		}
		var prs []map[string]any
		for _, pr := range listed {
			prs = append(prs, map[string]any{"number": pr.Number, "state": "open", "head": map[string]any{"sha": pr.Head, "ref": "topic"}})
		}
		if r.URL.Query().Get("page") != "1" {
			prs = nil
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(prs)
	})
	mux.Handle("/", srv)
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestOnlyOpenPullRequestsAreValidatedAndATooLargeOneIsSkippedAlone has
// five pull request heads on a Gitea: #1 and #3 closed (their refs stay,
// as forges keep them), #2 valid, #10 over the size limit. Only the open
// ones get a status: #10 one saying it was not validated, and #2 its
// verdict all the same; validatedHeads holds the open heads only, whatever
// it held before.
func TestOnlyOpenPullRequestsAreValidatedAndATooLargeOneIsSkippedAlone(t *testing.T) {
	f := newForgeFixture(t, "rp2", forge.Gitea, forgeToken)
	setGPUQuota(t, f.ns, "8", "0")
	main := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	push := func(n string, big bool) string {
		f.research.git("-C", f.research.work, "checkout", "--quiet", "-B", "pr"+n, main)
		f.research.edit("tau/ray.yaml", "  workers: 2\n", "  workers: 1\n")
		if big {
			noise := make([]byte, 128<<10)
			_, _ = rand.NewChaCha8([32]byte{1}).Read(noise) // gzip cannot shrink it below the limit
			f.research.write("data.b64", base64.StdEncoding.EncodeToString(noise))
		}
		f.research.git("-C", f.research.work, "add", "-A")
		f.research.git("-C", f.research.work, "commit", "--quiet", "-m", "pr "+n)
		f.research.git("-C", f.research.work, "push", "--quiet", "origin", "HEAD:refs/pull/"+n+"/head")
		return f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	}
	closed1, open2, closed3, big10 := push("1", false), push("2", false), push("3", false), push("10", true)
	api := pullsAPI(t, f.srv, forgeToken, func() ([]forge.PullRequest, error) {
		return []forge.PullRequest{{Number: 10, Head: big10}, {Number: 2, Head: open2}}, nil
	})
	ctx := context.Background()
	repo := f.forgeAPI(t, api.URL)
	base := repo.DeepCopy()
	repo.Status.ValidatedHeads = []string{closed1, strings.Repeat("e", 40), strings.Repeat("f", 40)} // from long ago
	if err := k8s.Status().Patch(ctx, repo, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.repos.PullRequests = &repoctrl.PullRequests{Client: k8s, Git: gitClient, Policies: f.repos.Policies, Posters: f.r.Posters, MaxTree: 64 << 10}
	f.poll(t)
	f.poll(t) // nothing is posted twice

	bySHA := map[string][]forgetest.Call{}
	for _, c := range f.srv.Accepted() {
		if c.Context == repoctrl.ValidateContext {
			bySHA[c.SHA] = append(bySHA[c.SHA], c)
		}
	}
	if len(bySHA[closed1])+len(bySHA[closed3]) != 0 {
		t.Errorf("closed pull requests got statuses: %+v %+v", bySHA[closed1], bySHA[closed3])
	}
	if c := bySHA[big10]; len(c) != 1 || c[0].State != "error" || !strings.Contains(c[0].Description, "not validated") || !strings.Contains(c[0].Description, "over the 64 KiB") {
		t.Errorf("the too large pull request: %+v, want one error status saying it is over 64 KiB", c)
	}
	if c := bySHA[open2]; len(c) != 1 || c[0].State != "success" {
		t.Errorf("the open, valid pull request: %+v, want one success although #10 was too large", c)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f.repo), repo); err != nil {
		t.Fatal(err)
	}
	want := []string{open2, big10}
	slices.Sort(want)
	if d := cmp.Diff(want, repo.Status.ValidatedHeads); d != "" {
		t.Errorf("validated heads (-want +got):\n%s", d)
	}
}

// forgeAPI points the repository's spec.forge at url and returns it as
// the API server has it then.
func (f *forgeFixture) forgeAPI(t *testing.T, url string) *taugridv1.TauRepository {
	t.Helper()
	ctx := context.Background()
	repo := f.repo.DeepCopy()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f.repo), repo); err != nil {
		t.Fatal(err)
	}
	base := repo.DeepCopy()
	repo.Spec.Forge.APIURL = url
	if err := k8s.Patch(ctx, repo, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestWithoutAPullRequestListOnlyTheNewestHeadsAreValidated(t *testing.T) {
	refs := gitsource.RefSet{"refs/heads/main": {SHA: "m"}}
	for n := 1; n <= 120; n++ {
		refs[fmt.Sprintf("refs/pull/%d/head", n)] = gitsource.Ref{SHA: fmt.Sprintf("h%d", n)}
	}
	refs["refs/merge-requests/7/head"] = gitsource.Ref{SHA: "mr7"}
	got := repoctrl.NewestHeads(refs, 3)
	want := map[string]string{"refs/pull/120/head": "h120", "refs/pull/119/head": "h119", "refs/pull/118/head": "h118"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("newest heads (-want +got):\n%s", d)
	}
	if got := repoctrl.NewestHeads(gitsource.RefSet{"refs/heads/main": {SHA: "m"}}, 3); len(got) != 0 {
		t.Errorf("no pull requests: %v", got)
	}
}
