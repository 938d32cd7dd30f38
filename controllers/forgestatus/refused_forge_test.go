package forgestatus

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/test/builders"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	badSHA   = "1111111111111111111111111111111111111111"
	otherSHA = "2222222222222222222222222222222222222222"
)

var researchRepo = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "research"}}

// refusedTwice is a repository of two refused refs, with a forge at api
// unless noForge.
func refusedTwice(api string, noForge bool, secret string) *builders.TauRepositoryBuilder {
	b := builders.MakeTauRepository("research", ns, repoURL)
	if !noForge {
		b = forgeRepo(api, secret)
	}
	return b.ForgeRefusal("refs/tags/run/bad", badSHA, "tau.yaml:3:1: unknown field gpu").
		ForgeRefusal(taugridv1.RunRefPrefix+"r-20261130", otherSHA, "profile h200-64 is not allowed")
}

func TestTheRefusalReporterPostsEachRefusalOnce(t *testing.T) {
	badStatus := "201 failure tau/tags/run/bad: refs/tags/run/bad will not run: tau.yaml:3:1: unknown field gpu"
	otherStatus := "201 failure tau/r-20261130: refs/tau/runs/r-20261130 will not run: profile h200-64 is not allowed"
	badKey, otherKey := "refs/tags/run/bad@"+badSHA, taugridv1.RunRefPrefix+"r-20261130@"+otherSHA
	cases := map[string]struct {
		noForge  bool
		secret   string
		reported []string
		fail     *forgetest.Failure
		wantErr  string
		posted   []string
		events   []string
		after    []string // status.reportedRefusals after
	}{
		"a repository without spec.forge posts nothing": {
			noForge: true},
		"each refusal is claimed and posted": {
			posted: []string{badStatus, otherStatus}, after: []string{badKey, otherKey}},
		"a refusal reported before is not posted again": {
			reported: []string{badKey}, posted: []string{otherStatus}, after: []string{badKey, otherKey}},
		"every refusal reported before: nothing posted": {
			reported: []string{badKey, otherKey}, after: []string{badKey, otherKey}},
		"the key of a refusal gone is dropped at the next claim": {
			reported: []string{badKey, "refs/tags/run/fixed@" + otherSHA}, posted: []string{otherStatus}, after: []string{badKey, otherKey}},
		"no forge Secret: a Warning per refusal, the claims kept, no retry": {
			secret: "absent", after: []string{badKey, otherKey},
			events: []string{"Warning ForgeRejected posting the refusal of refs/tags/run/bad: credentials Secret not found: team-a/absent",
				"Warning ForgeRejected posting the refusal of refs/tau/runs/r-20261130: credentials Secret not found: team-a/absent"}},
		"the forge's refusal (422): a Warning, the claim kept": {
			fail:   &forgetest.Failure{Code: http.StatusUnprocessableEntity, Body: "no such commit"},
			posted: []string{"422" + badStatus[3:], otherStatus}, after: []string{badKey, otherKey},
			events: []string{"Warning ForgeRejected posting the refusal of refs/tags/run/bad: gitea: HTTP 422: no such commit"}},
		"a failing forge (500): the claim given back and the error returned for backoff": {
			fail:    &forgetest.Failure{Code: http.StatusInternalServerError, Body: "oops"},
			wantErr: "gitea: HTTP 500: oops", posted: []string{"500" + badStatus[3:]}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			secret := tc.secret
			if secret == "" {
				secret = "forge"
			}
			w := newForgeWorld(t, nil, func(api string) []client.Object {
				return []client.Object{refusedTwice(api, tc.noForge, secret).ForgeReported(tc.reported...).Obj()}
			})
			if tc.fail != nil {
				w.srv.FailNext(1, *tc.fail)
			}
			r := &RefusalReporter{Client: w.c, Posters: w.posters, Recorder: w.events}
			got, err := r.Reconcile(context.Background(), researchRepo)
			if gotErr := errText(err); gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
			if got != (reconcile.Result{}) {
				t.Errorf("result %+v, want none", got)
			}
			if d := cmp.Diff(tc.posted, w.posted()); d != "" {
				t.Errorf("posted (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.events, w.drained()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			after := tc.after
			if tc.noForge {
				after = tc.reported
			}
			if d := cmp.Diff(after, w.repo(t).Status.ReportedRefusals); d != "" {
				t.Errorf("status.reportedRefusals (-want +got):\n%s", d)
			}
		})
	}
}
