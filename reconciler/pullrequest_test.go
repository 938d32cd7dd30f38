package reconciler

import (
	"context"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/reconciler/forge"
	"github.com/taugrid/taugrid/reconciler/forge/forgetest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPullRequestHeadsThatChangeATauFileGetAValidationStatus pushes three
// pull request heads, as GitHub advertises them (refs/pull/<n>/head): one
// breaking tau.yaml, one changing tau/ray.yaml validly, one touching no tau
// file. Only the first two get a tau/validate status, once each.
func TestPullRequestHeadsThatChangeATauFileGetAValidationStatus(t *testing.T) {
	f := newForgeFixture(t, "rp1", forge.GitHub, forgeToken)
	f.repos.PullRequests = &PullRequests{Client: k8s, Git: gitClient, Policies: f.repos.Policies, Forge: f.r}
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
		if c.Context == ValidateContext {
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
