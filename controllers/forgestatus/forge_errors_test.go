package forgestatus

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/forge/forgetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Each failure to post is classified where it arises: settings a human must
// fix raise a Warning and retry slowly (never a hot loop), a rate limit
// waits as the forge says, anything else returns for backoff. A post the
// forge surely refused puts the previous record back; one whose outcome is
// unknown stays in flight, to be settled by reading the forge.
func TestAFailedPostIsClassified(t *testing.T) {
	inFlight := taugridv1.ForgeStatus{Context: "tau/default r", State: "pending", Description: "queued in runs",
		Phase: taugridv1.PhaseQueued, PostedAt: metav1.NewTime(sharedtest.Now), InFlight: true}
	cases := map[string]struct {
		secret  string
		fail    *forgetest.Failure
		want    reconcile.Result
		wantErr string
		posted  []string
		events  []string
		record  *taugridv1.ForgeStatus
	}{
		"no forge Secret: a Warning and a retry after ForgeSettingsRetry": {
			secret: "absent",
			want:   reconcile.Result{RequeueAfter: ForgeSettingsRetry},
			events: []string{"Warning ForgeRejected posting pending status: credentials Secret not found: team-a/absent"}},
		"the forge refuses the token: a Warning, a slow retry, the record put back": {
			fail:   &forgetest.Failure{Code: http.StatusUnauthorized, Body: "Bad credentials"},
			want:   reconcile.Result{RequeueAfter: ForgeSettingsRetry},
			posted: []string{"401 pending tau/default r: queued in runs"},
			events: []string{"Warning ForgeRejected posting pending status: gitea: HTTP 401: Bad credentials"}},
		"the forge's cap of statuses (422): a Warning and no retry": {
			fail:   &forgetest.Failure{Code: http.StatusUnprocessableEntity, Body: "This SHA and context has reached the maximum number of statuses (1000)."},
			posted: []string{"422 pending tau/default r: queued in runs"},
			events: []string{"Warning ForgeRejected posting pending status: gitea: HTTP 422: This SHA and context has reached the maximum number of statuses (1000)."}},
		"a rate limit waits as long as the forge says": {
			fail:   &forgetest.Failure{Code: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "30"}, Body: "slow down"},
			want:   reconcile.Result{RequeueAfter: 30 * time.Second},
			posted: []string{"429 pending tau/default r: queued in runs"}},
		"a failing forge (502): the error returned for backoff, the record left in flight": {
			fail:    &forgetest.Failure{Code: http.StatusBadGateway, Body: "upstream down"},
			wantErr: "posting pending status: gitea: HTTP 502: upstream down",
			posted:  []string{"502 pending tau/default r: queued in runs"},
			record:  &inFlight},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			secret := tc.secret
			if secret == "" {
				secret = "forge"
			}
			w := newForgeWorld(t, nil, func(api string) []client.Object {
				return []client.Object{forgeRepo(api, secret).Obj(), queuedRun("").Obj()}
			})
			if tc.fail != nil {
				w.srv.FailNext(1, *tc.fail)
			}
			r := &ForgeReconciler{Client: w.c, Clock: w.clock, Recorder: w.events, Posters: w.posters}
			got, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "r"}})
			if gotErr := errText(err); gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.posted, w.posted()); d != "" {
				t.Errorf("posted (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.events, w.drained()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.record, w.run(t, "r").Status.Forge); d != "" {
				t.Errorf("status.forge (-want +got):\n%s", d)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
