package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/gitsource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	repoctrl "github.com/taugrid/taugrid/controllers/repository"
	"github.com/taugrid/taugrid/policy"
)

// listingGit counts the ref listings asked for outside a poll.
type listingGit struct {
	policy.Git
	n *atomic.Int32
}

func (g listingGit) ListRefs(ctx context.Context, r gitsource.Remote) (gitsource.RefSet, error) {
	g.n.Add(1)
	return g.Git.ListRefs(ctx, r)
}

// Pull request validation works from the poll's own listing: one listing a
// poll, not two (hack/scale: 100 repositories listed 226-238 times a
// minute at a 1 m interval).
func TestPullRequestValidationReusesThePollsListing(t *testing.T) {
	f := newForgeFixture(t, "rp9", forge.GitHub, forgeToken)
	var lists atomic.Int32
	g := listingGit{Git: gitClient, n: &lists}
	f.repos.Git = g
	f.repos.PullRequests = &repoctrl.PullRequests{Client: k8s, Git: g, Policies: f.repos.Policies, Posters: f.r.Posters}
	f.poll(t) // the first poll also lists for its baseline
	lists.Store(0)
	main := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	f.research.git("-C", f.research.work, "checkout", "--quiet", "-B", "pr1", main)
	f.research.edit("tau.yaml", "  gpus: 1\n", "  gpus: 99\n")
	f.research.git("-C", f.research.work, "commit", "--quiet", "-am", "pr 1")
	f.research.git("-C", f.research.work, "push", "--quiet", "origin", "HEAD:refs/pull/1/head")
	f.poll(t)
	f.poll(t)

	if n := lists.Load(); n != 0 {
		t.Errorf("%d ref listings besides the polls' own, want none", n)
	}
	var got []forgetest.Call
	for _, c := range f.srv.Accepted() {
		if c.Context == repoctrl.ValidateContext {
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0].State != "failure" {
		t.Errorf("tau/validate statuses %+v, want one failure for the pull request", got)
	}
}

// An idle repository asks the forge which pull requests are open once, not
// at every poll (hack/scale: 13.8 forge requests per run at 1,000
// repositories): again when a head is pushed, whose new commit is
// validated at that poll; again after a listing failed; and, to see a
// pull request closed without its ref changing, after pullListingRefresh
// intervals. A repository without pull request heads asks nothing.
func TestIdlePollsListOpenPullRequestsOnce(t *testing.T) {
	f := newForgeFixture(t, "rp10", forge.Gitea, forgeToken)
	var listings, failNext atomic.Int32
	var open atomic.Bool
	api := pullsAPI(t, f.srv, forgeToken, func() ([]forge.PullRequest, error) {
		listings.Add(1)
		if failNext.CompareAndSwap(1, 0) {
			return nil, errors.New("the forge is restarting")
		}
		if !open.Load() {
			return nil, nil
		}
		return []forge.PullRequest{{Number: 1}}, nil // the head ref's commit is what is validated
	})
	f.forgeAPI(t, api.URL)
	f.repos.PullRequests = &repoctrl.PullRequests{Client: k8s, Git: gitClient, Policies: f.repos.Policies, Posters: f.r.Posters}
	expect := func(step string, want int32) {
		t.Helper()
		if n := listings.Load(); n != want {
			t.Fatalf("%s: %d pull request listings in all, want %d", step, n, want)
		}
	}
	polls := func(n int) {
		t.Helper()
		for range n {
			f.poll(t)
		}
	}
	polls(3)
	expect("no pull request heads", 0)

	main := f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	f.research.git("-C", f.research.work, "checkout", "--quiet", "-B", "pr1", main)
	tauYAML, err := os.ReadFile(filepath.Join(f.research.work, "tau.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	push := func(note string) string {
		t.Helper()
		f.research.write("tau.yaml", string(tauYAML)+"# "+note+"\n")
		f.research.git("-C", f.research.work, "commit", "--quiet", "-am", note)
		f.research.git("-C", f.research.work, "push", "--quiet", "--force", "origin", "HEAD:refs/pull/1/head")
		return f.research.git("-C", f.research.work, "rev-parse", "HEAD")
	}
	validated := func(sha string) int {
		n := 0
		for _, c := range f.srv.Accepted() {
			if c.Context == repoctrl.ValidateContext && c.SHA == sha {
				n++
			}
		}
		return n
	}
	open.Store(true)
	first := push("opened")
	polls(4)
	expect("a pull request opened, then idle polls", 1)
	if n := validated(first); n != 1 {
		t.Errorf("the opened head got %d tau/validate statuses, want 1", n)
	}

	pushed := push("pushed")
	f.poll(t)
	expect("a head pushed", 2)
	if n := validated(pushed); n != 1 {
		t.Errorf("the pushed head got %d tau/validate statuses at its poll, want 1", n)
	}
	polls(2)
	expect("idle again", 2)

	failNext.Store(1)
	retried := push("pushed during an outage")
	f.poll(t)
	expect("a listing that failed", 3)
	if n := validated(retried); n != 0 {
		t.Fatalf("a head validated although the listing failed: %d statuses", n)
	}
	polls(2)
	expect("the failed listing is done again, once", 4)
	if n := validated(retried); n != 1 {
		t.Errorf("the head pushed during the outage got %d tau/validate statuses, want 1 at the next poll", n)
	}

	open.Store(false) // closed: forges keep its ref, at the same commit
	f.poll(t)
	expect("closed, its ref unchanged", 4)
	f.clock.Step(repoctrl.PullListingRefresh * time.Minute)
	f.poll(t)
	expect("pullListingRefresh intervals on", 5)
	repo := f.repo.DeepCopy()
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(f.repo), repo); err != nil {
		t.Fatal(err)
	}
	if len(repo.Status.ValidatedHeads) != 0 {
		t.Errorf("validated heads %v after the pull request closed, want none", repo.Status.ValidatedHeads)
	}
}
