package platform

import (
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestAPolicyCommitMetWithATransientFailureIsTriedAgain: git or the API
// server failing while a commit is applied is no verdict on the commit:
// the error is returned (retried with backoff), nothing is stalled, and
// the next look applies the commit once the failure passed.
func TestAPolicyCommitMetWithATransientFailureIsTriedAgain(t *testing.T) {
	cases := map[string]func(*platformWorld){
		"git cannot be reached while the policy is fetched": func(w *platformWorld) {
			w.git.archiveErr = &gitsource.Error{Op: "archive", URL: "https://git.example.com/platform.git", Kind: gitsource.ErrUnreachable}
		},
		"the API server is unavailable while the queues are applied": func(w *platformWorld) {
			w.refuseApply = func(applyCall) error { return apierrors.NewServiceUnavailable("etcd is slow") }
		},
	}
	for name, fault := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, nil, platform().Obj())
			w.git.push(sha("a1"), exampleTree(t, nil))
			fault(w)
			if _, err := w.reconcile(t); err == nil {
				t.Fatal("no error: a failure that may pass was taken for a verdict")
			}
			p := w.platform(t)
			if c := condition(p, taugridv1.ConditionStalled); c != "" {
				t.Errorf("Stalled %q: a transient failure refused the commit", c)
			}
			if p.Status.Commit != "" || p.Status.ObservedGeneration == p.Generation {
				t.Errorf("commit %q, observedGeneration %d: want none applied, the generation not handled", p.Status.Commit, p.Status.ObservedGeneration)
			}
			w.git.archiveErr, w.refuseApply = nil, nil
			w.mustReconcile(t)
			if p := w.platform(t); p.Status.Commit != sha("a1") {
				t.Errorf("after the failure passed: commit %q, want %s applied", p.Status.Commit, sha("a1"))
			}
		})
	}
}
