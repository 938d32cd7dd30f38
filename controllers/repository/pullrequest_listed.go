package repository

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/controllers/shared"
)

// PullListingRefresh is how many poll intervals a forge listing of open
// pull requests is trusted while nothing it depends on changed. What the
// refs cannot show (a pull request closed, or reopened at the same head;
// one the forge's API lists later than its ref appears; a token that may
// now read pull requests) shows within this many polls.
const PullListingRefresh = 10

// pullListing is what the last forge listing of a repository's open pull
// requests was done for (PullRequests.listings), in memory only: a poll
// that finds the same needs no new listing, whose outcome could not
// differ. hack/scale: 13.8 forge requests per run at 1,000 repositories,
// one listing and a Secret GET per poll.
type pullListing struct {
	uid types.UID
	sum [sha256.Size]byte
	at  time.Time
}

// pullHeads maps the listing's pull request head refs to their commits.
func pullHeads(refs gitsource.RefSet) map[string]string {
	heads := map[string]string{}
	for name, r := range refs {
		if (strings.HasPrefix(name, "refs/pull/") || strings.HasPrefix(name, "refs/merge-requests/")) && pullHeadRE.MatchString(name) {
			heads[name] = r.Commit()
		}
	}
	return heads
}

// listingSum digests what a listing's outcome depends on besides the
// forge: the repository's spec (its generation: spec.forge, the URL),
// status.validatedHeads and the pull request head refs.
func listingSum(repo *taugridv1.TauRepository, heads map[string]string) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", repo.Generation)
	for _, v := range repo.Status.ValidatedHeads {
		fmt.Fprintf(h, "v %s\n", v)
	}
	for _, name := range slices.Sorted(maps.Keys(heads)) {
		fmt.Fprintf(h, "h %s %s\n", name, heads[name])
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// listed says whether the repository's last listing was done for the same
// spec, validated heads and head refs, recently enough to trust.
func (p *PullRequests) listed(repo *taugridv1.TauRepository, heads map[string]string, now time.Time) bool {
	last, ok := shared.MemoOf(&p.listings).Get(client.ObjectKeyFromObject(repo))
	return ok && last.uid == repo.UID && last.sum == listingSum(repo, heads) &&
		now.Sub(last.at) < PullListingRefresh*repo.Spec.Interval.Duration
}

// remember records a listing whose outcome is all done: every head
// validated, status.validatedHeads as it now stands.
func (p *PullRequests) remember(repo *taugridv1.TauRepository, heads map[string]string, now time.Time) {
	shared.MemoOf(&p.listings).Put(client.ObjectKeyFromObject(repo), pullListing{uid: repo.UID, sum: listingSum(repo, heads), at: now})
}

// forget drops what is remembered of the repository's listing: it was
// deleted, or a listing or a validation failed and must be done again.
func (p *PullRequests) forget(key types.NamespacedName) {
	shared.MemoOf(&p.listings).Forget(key)
}

// now is the forge reconciler's clock, else the wall clock.
func (p *PullRequests) now() time.Time {
	if p.Posters != nil && p.Posters.Clock != nil {
		return p.Posters.Clock.Now()
	}
	return time.Now()
}
