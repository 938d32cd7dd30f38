package admission

import (
	"encoding/json"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The verdict is written over the stored workload as the API server
// applies a JSON patch (with the library it uses): Kueue's writes since the
// copy the check read (its conditions, the other checks' states) do not
// refuse it and stay as Kueue wrote them; a change to the check itself
// (Kueue reset it, or the list moved) does, and nothing is written.
func TestTheVerdictIsWrittenOverKueuesWritesButNotOverAResetCheck(t *testing.T) {
	pendingSince := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	decidedAt := metav1.NewTime(pendingSince.Add(3 * time.Second))
	read := kueue.WorkloadStatus{AdmissionChecks: []kueue.AdmissionCheckState{
		{Name: "multikueue-x", State: kueue.CheckStatePending, LastTransitionTime: pendingSince},
		{Name: "taugrid-policy-default", State: kueue.CheckStatePending, LastTransitionTime: pendingSince, RetryCount: ptr.To[int32](1)},
	}}
	verdict := kueue.AdmissionCheckState{Name: "taugrid-policy-default", State: kueue.CheckStateReady, Message: "TauGrid policy: the Job is as submitted", LastTransitionTime: decidedAt}
	patch := verdictPatch(1, read.AdmissionChecks[1], verdict)

	cases := []struct {
		name   string
		stored func(*kueue.WorkloadStatus)
		want   func(*kueue.WorkloadStatus) // nil: refused
	}{
		{"as read", func(*kueue.WorkloadStatus) {}, func(s *kueue.WorkloadStatus) {
			s.AdmissionChecks[1].State, s.AdmissionChecks[1].Message, s.AdmissionChecks[1].LastTransitionTime = verdict.State, verdict.Message, decidedAt
		}},
		{"Kueue wrote a condition and the other check since", func(s *kueue.WorkloadStatus) {
			s.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: decidedAt}}
			s.AdmissionChecks[0].State, s.AdmissionChecks[0].LastTransitionTime = kueue.CheckStateReady, decidedAt
		}, func(s *kueue.WorkloadStatus) {
			s.AdmissionChecks[1].State, s.AdmissionChecks[1].Message, s.AdmissionChecks[1].LastTransitionTime = verdict.State, verdict.Message, decidedAt
		}},
		{"Kueue reset the check since", func(s *kueue.WorkloadStatus) {
			s.AdmissionChecks[1].LastTransitionTime = metav1.NewTime(pendingSince.Add(time.Second))
		}, nil},
		{"the check was decided since", func(s *kueue.WorkloadStatus) {
			s.AdmissionChecks[1].State = kueue.CheckStateRejected
		}, nil},
		{"the checks moved", func(s *kueue.WorkloadStatus) {
			s.AdmissionChecks = s.AdmissionChecks[1:]
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stored := &kueue.Workload{Status: *read.DeepCopy()}
			tc.stored(&stored.Status)
			doc, err := json.Marshal(stored)
			if err != nil {
				t.Fatal(err)
			}
			data, err := patch.Data(stored)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := jsonpatch.DecodePatch(data)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := ops.Apply(doc)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("the verdict was written over a check that changed since it was read: %s", patched)
				}
				return
			}
			if err != nil {
				t.Fatalf("the verdict was refused: %v", err)
			}
			got := &kueue.Workload{}
			if err := json.Unmarshal(patched, got); err != nil {
				t.Fatal(err)
			}
			want := stored.DeepCopy()
			tc.want(&want.Status)
			wantJSON, _ := json.Marshal(want)
			gotJSON, _ := json.Marshal(got)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("patched workload:\n got %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}
