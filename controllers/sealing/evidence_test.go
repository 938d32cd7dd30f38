package sealing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/test/builders"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fullStore fails every blob write, as a full or unreachable store does.
type fullStore struct{ evidence.Store }

func (fullStore) PutBlob(context.Context, string, []byte) error {
	return fmt.Errorf("writing blob: %w", syscall.ENOSPC)
}

// sealedBefore stores a bundle of attempt n of run r, as a seal whose
// status write was lost left it.
func sealedBefore(t *testing.T, st evidence.Store, n int) {
	t.Helper()
	b := evidence.NewBundle(evidence.Key{Namespace: ns, Run: "r", Attempt: n}, "Succeeded")
	b.Add(evidence.ArtifactRecord, evidence.MediaJSON, []byte("{}\n"))
	sealed, err := b.Seal(sharedtest.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.Write(context.Background(), st, sealed); err != nil {
		t.Fatal(err)
	}
}

// digests replaces "{n}" in s with the digest of attempt n's bundle.
func (w *sealWorld) digests(t *testing.T, s string) string {
	t.Helper()
	for n := 1; n <= 2; n++ {
		if !strings.Contains(s, fmt.Sprintf("{%d}", n)) {
			continue
		}
		raw, err := w.store.Manifest(context.Background(), evidence.Key{Namespace: ns, Run: "r", Attempt: n})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		s = strings.ReplaceAll(s, fmt.Sprintf("{%d}", n), "sha256:"+hex.EncodeToString(sum[:]))
	}
	return s
}

func TestTheEvidenceRecorderSealsEveryEndedAttemptOnce(t *testing.T) {
	bundle1, bundle2 := "bundles/team-a/r/1.json", "bundles/team-a/r/2.json"
	storeFull := "evidence of attempt 1 is not stored yet (retrying): storing evidence of team-a/r#1: writing blob: no space left on device"
	cases := map[string]struct {
		run      *taugridv1.TauRun // nil: none
		full     bool
		before   []int // attempts sealed before
		wantErr  string
		evidence string // the EvidenceSealed condition after: status/reason/message; "" none
		sealed   []string
		events   []string
	}{
		"a run that is gone: nothing to seal": {},
		"a run whose attempts wait for none: nothing to seal": {
			run: builders.MakeTauRun("r", ns).Phase(taugridv1.PhaseRunning, "").Attempt("r-1", started, ended, "").Obj()},
		"a run sealed before: nothing to do": {
			run:      endedRun().Condition(shared.ConditionEvidence, metav1.ConditionTrue, shared.ReasonEvidenceSealed, "attempt 1 sealed").Obj(),
			evidence: "True/Sealed/attempt 1 sealed"},
		"an ended attempt waiting is sealed": {
			run:      sealingRun().Obj(),
			evidence: "True/Sealed/attempt 1 sealed as {1}", sealed: []string{bundle1}},
		"a retried attempt and the last are both sealed": {
			run: builders.MakeTauRun("r", ns).PolicyAt(policyHead).Phase(taugridv1.PhaseSucceeded, "").
				Attempt("r-1", started, started.Add(10*time.Minute), taugridv1.FailurePreempted).Attempt("r-2", started.Add(11*time.Minute), ended, "").
				Condition(shared.ConditionEvidence, metav1.ConditionFalse, shared.ReasonSealing, "").Obj(),
			evidence: "True/Sealed/attempt 2 sealed as {2}", sealed: []string{bundle1, bundle2}},
		"a bundle stored before a lost status write: the condition heals, nothing stored again": {
			run: sealingRun().Obj(), before: []int{1},
			evidence: "True/Sealed/every ended attempt is sealed", sealed: []string{bundle1}},
		"a full store: StoreUnavailable, a Warning and the error for backoff": {
			run: sealingRun().Obj(), full: true,
			wantErr:  "evidence of run team-a/r: " + storeFull,
			evidence: "False/StoreUnavailable/" + storeFull,
			events:   []string{"Warning StoreUnavailable " + storeFull}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{researchRepo(), hfSecret()}
			if tc.run != nil {
				objs = append(objs, tc.run)
			}
			w := newSealWorld(t, nil, objs...)
			for _, n := range tc.before {
				sealedBefore(t, w.store, n)
			}
			if tc.full {
				w.e.Store = fullStore{w.store}
			}
			res, err := w.e.Reconcile(context.Background(), runR)
			if got := errText(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if res.RequeueAfter != 0 {
				t.Errorf("result %+v: the rate limiter paces retries, not a requeue", res)
			}
			if d := cmp.Diff(tc.sealed, w.sealed(t)); d != "" {
				t.Errorf("sealed (-want +got):\n%s", d)
			}
			if d := cmp.Diff(w.digestsAll(t, tc.events), w.drained()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if tc.run == nil {
				return
			}
			c := apimeta.FindStatusCondition(w.run(t).Status.Conditions, shared.ConditionEvidence)
			got := ""
			if c != nil {
				got = string(c.Status) + "/" + c.Reason + "/" + c.Message
			}
			if want := w.digests(t, tc.evidence); got != want {
				t.Errorf("EvidenceSealed = %q, want %q", got, want)
			}
		})
	}
}

func (w *sealWorld) digestsAll(t *testing.T, ss []string) []string {
	t.Helper()
	var out []string
	for _, s := range ss {
		out = append(out, w.digests(t, s))
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
