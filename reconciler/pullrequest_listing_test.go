package reconciler

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/reconciler/forge"
	"github.com/taugrid/taugrid/reconciler/forge/forgetest"
)

// listingGit counts the ref listings asked for outside a poll.
type listingGit struct {
	Git
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
	f.repos.PullRequests = &PullRequests{Client: k8s, Git: g, Policies: f.repos.Policies, Forge: f.r}
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
		if c.Context == ValidateContext {
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0].State != "failure" {
		t.Errorf("tau/validate statuses %+v, want one failure for the pull request", got)
	}
}
