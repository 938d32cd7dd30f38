package shared

import (
	"maps"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A cached pod keeps the labels TauGrid and others select and read it by
// (its run and attempt, KubeRay's node type) and none of those the Job
// controller and Kueue add, which nothing in TauGrid reads: 11 labels
// were past what a map's smallest table holds.
func TestACachedPodKeepsNoLabelTheJobControllerOrKueueAdds(t *testing.T) {
	ours := map[string]string{
		render.LabelManagedBy: render.ManagedBy, render.LabelRun: "research-4ce45064c8", render.LabelAttempt: "1",
		"taugrid.dev/repository": "research", "ray.io/node-type": "worker",
	}
	labels := maps.Clone(ours)
	maps.Copy(labels, map[string]string{
		"batch.kubernetes.io/controller-uid": "c289fae7", "controller-uid": "c289fae7",
		"batch.kubernetes.io/job-name": "research-4ce45064c8-1", "job-name": "research-4ce45064c8-1",
		"kueue.x-k8s.io/cluster-queue-name": "bud-a", "kueue.x-k8s.io/local-queue-name": "runs", "kueue.x-k8s.io/podset": "main",
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "research-4ce45064c8-1-6cwsn", Labels: labels}}
	if _, err := CacheTransform(pod); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(pod.Labels, ours) {
		t.Errorf("the cached pod's labels: %v; want %v", pod.Labels, ours)
	}
}

// An ended run is cached without its workload's field digests, which only
// the admission check reads, and only of a run that has not ended; a run
// that has not ended keeps them, and everything else of the run is kept.
func TestAnEndedRunIsCachedWithoutItsWorkloadsFieldDigests(t *testing.T) {
	run := func(p taugridv1.RunPhase) *taugridv1.TauRun {
		return &taugridv1.TauRun{Status: taugridv1.TauRunStatus{Phase: p, Workload: &taugridv1.WorkloadStatus{
			Kind: "Job", Name: "research-4ce45064c8-1", Digest: "sha256:e91cd1d7", FieldDigests: "01389e6b624b60c58c9d", Generation: 1, LabelsDigest: "sha256:a5e37a5e",
		}}}
	}
	for _, p := range []taugridv1.RunPhase{taugridv1.PhasePending, taugridv1.PhaseQueued, taugridv1.PhaseAdmitted, taugridv1.PhaseRunning,
		taugridv1.PhaseSucceeded, taugridv1.PhaseFailed, taugridv1.PhaseCancelled} {
		r := run(p)
		if _, err := CacheTransform(r); err != nil {
			t.Fatal(err)
		}
		want := run(p).Status.Workload
		if p.Final() {
			want.FieldDigests = ""
		}
		if *r.Status.Workload != *want {
			t.Errorf("%s: cached workload %+v; want %+v", p, *r.Status.Workload, *want)
		}
	}
}
