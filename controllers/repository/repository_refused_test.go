package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared/sharedtest"
	"github.com/taugrid/taugrid/gitsource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// refusingRef makes the API server refuse, as invalid, the TauRun of ref.
func refusingRef(ref string) *interceptor.Funcs {
	return &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if run, ok := obj.(*taugridv1.TauRun); ok && run.Spec.Trigger.Ref == ref {
			return apierrors.NewInvalid(taugridv1.GroupVersion.WithKind("TauRun").GroupKind(), run.Name,
				field.ErrorList{field.Invalid(field.NewPath("spec", "target"), run.Spec.Target, "not allowed here")})
		}
		return c.Create(ctx, obj, opts...)
	}}
}

// TestARefusedRefIsRecordedAndReportedOnce: a ref whose run cannot be
// created as asked lands in status.refusedRefs and RefsRefused, raises one
// Warning, and does not hold up the poll: a good ref pushed with it runs.
// Deleting the bad ref clears the refusal.
func TestARefusedRefIsRecordedAndReportedOnce(t *testing.T) {
	bad := sha("ba")
	cases := map[string]struct {
		repo    *taugridv1.TauRepository
		faults  *interceptor.Funcs
		push    func(g *fakeGit) string // pushes the bad ref, returns its name
		refused taugridv1.RefusedRef    // Message is checked to hold message
		message string
	}{
		"a run ref whose request names a target that is no name": {
			push: func(g *fakeGit) string {
				g.refs["refs/tau/runs/bad"] = g.annotated(bad, "bad", c1, "target: Not_A_Name\n")
				return "refs/tau/runs/bad"
			},
			refused: taugridv1.RefusedRef{Ref: "refs/tau/runs/bad", SHA: bad, Commit: c1, Reason: ReasonBadRunRequest},
			message: "invalid run request",
		},
		"a watched branch commit adding a tau file whose target is no name": {
			repo: research().Branches("main").Obj(),
			push: func(g *fakeGit) string {
				g.commit(c2, c1, map[string]string{"tau.yaml": "command: train v1", "tau/Not_A_Name.yaml": "x: 1"})
				g.refs["refs/heads/main"] = at(c2)
				return "refs/heads/main"
			},
			refused: taugridv1.RefusedRef{Ref: "refs/heads/main", SHA: c2, Commit: c2, Reason: ReasonBadRunRequest},
			message: "tau/Not_A_Name.yaml",
		},
		"a run the API server refuses": {
			faults: refusingRef("refs/tau/runs/bad"),
			push: func(g *fakeGit) string {
				g.refs["refs/tau/runs/bad"] = at(c1)
				return "refs/tau/runs/bad"
			},
			refused: taugridv1.RefusedRef{Ref: "refs/tau/runs/bad", SHA: c1, Commit: c1, Reason: ReasonRunRefused},
			message: "spec.target: Invalid value: \"default\": not allowed here",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := tc.repo
			if repo == nil {
				repo = research().Obj()
			}
			w := newRepoWorld(t, tc.faults, repo)
			registered(w.git)
			w.mustReconcile(t)
			ref := tc.push(w.git)
			w.git.refs["refs/tau/runs/good"] = at(c1)
			w.mustReconcile(t)
			w.mustReconcile(t)
			got := w.repo(t)
			tc.refused.Time = metav1.NewTime(sharedtest.Now)
			if diff := cmp.Diff([]taugridv1.RefusedRef{tc.refused}, got.Status.RefusedRefs,
				cmpopts.IgnoreFields(taugridv1.RefusedRef{}, "Message")); diff != "" {
				t.Errorf("refusedRefs (-want +got):\n%s", diff)
			}
			if len(got.Status.RefusedRefs) == 1 && !strings.Contains(got.Status.RefusedRefs[0].Message, tc.message) {
				t.Errorf("refusal says %q, want it to say %q", got.Status.RefusedRefs[0].Message, tc.message)
			}
			wantConds := []string{"Ready=True/Polled", "RefsRefused=True/" + tc.refused.Reason}
			if diff := cmp.Diff(wantConds, conditions(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if !strings.HasSuffix(readyMessage(got), "; 1 refused (condition RefsRefused)") {
				t.Errorf("Ready says %q, want it to count the refusal", readyMessage(got))
			}
			wantEvents := []string{"Warning " + tc.refused.Reason, "Normal RunRequested"}
			if diff := cmp.Diff(wantEvents, reasons(w.drain())); diff != "" {
				t.Errorf("events over two polls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]runSummary{want(taugridv1.TriggerRunRef, "refs/tau/runs/good", c1, "default", "", "")}, summarize(w.runs(t))); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}

			delete(w.git.refs, ref)
			w.mustReconcile(t)
			got = w.repo(t)
			if got.Status.RefusedRefs != nil {
				t.Errorf("refusedRefs after the bad ref went: %+v", got.Status.RefusedRefs)
			}
			if diff := cmp.Diff([]string{"Ready=True/Polled"}, conditions(got)); diff != "" {
				t.Errorf("conditions after the bad ref went (-want +got):\n%s", diff)
			}
		})
	}
}

// TestARefusedRefThatMovesIsJudgedAnew: the refusal of a ref that moves is
// dropped, and its new commit runs.
func TestARefusedRefThatMovesIsJudgedAnew(t *testing.T) {
	w := newRepoWorld(t, nil, research().Obj())
	registered(w.git)
	w.mustReconcile(t)
	w.git.refs["refs/tau/runs/r"] = w.git.annotated(sha("ba"), "r", c1, "target: Not_A_Name\n")
	w.mustReconcile(t)
	if n := len(w.repo(t).Status.RefusedRefs); n != 1 {
		t.Fatalf("%d refusals, want 1", n)
	}
	w.git.refs["refs/tau/runs/r"] = w.git.annotated(sha("bb"), "r", c1, "target: default\n")
	w.mustReconcile(t)
	if got := w.repo(t).Status.RefusedRefs; got != nil {
		t.Errorf("refusedRefs after the ref moved: %+v", got)
	}
	if diff := cmp.Diff([]runSummary{want(taugridv1.TriggerRunRef, "refs/tau/runs/r", c1, "default", "bob@example.com", sha("bb"))},
		summarize(w.runs(t))); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}

// TestRefuseKeepsTheNewestRefusals: one refusal per ref, newest first, at
// most MaxRefusedRefs, each message bounded.
func TestRefuseKeepsTheNewestRefusals(t *testing.T) {
	w := newRepoWorld(t, nil)
	repo := research().Obj()
	for i := range taugridv1.MaxRefusedRefs + 2 {
		w.r.Refuse(repo, gitsource.Problem{Ref: fmt.Sprintf("refs/tau/runs/r-%02d", i), SHA: c1, Commit: c1, Err: errors.New("bad")}, ReasonBadRunRequest)
	}
	w.r.Refuse(repo, gitsource.Problem{Ref: "refs/tau/runs/r-05", SHA: c2, Commit: c2, Err: errors.New(strings.Repeat("x", 5000))}, ReasonRunRefused)
	var refs []string
	for _, o := range repo.Status.RefusedRefs {
		refs = append(refs, o.Ref)
	}
	wantRefs := []string{"refs/tau/runs/r-05"}
	for i := taugridv1.MaxRefusedRefs + 1; len(wantRefs) < taugridv1.MaxRefusedRefs; i-- {
		if i != 5 {
			wantRefs = append(wantRefs, fmt.Sprintf("refs/tau/runs/r-%02d", i))
		}
	}
	if diff := cmp.Diff(wantRefs, refs); diff != "" {
		t.Errorf("refused refs, newest first (-want +got):\n%s", diff)
	}
	newest := repo.Status.RefusedRefs[0]
	if newest.SHA != c2 || newest.Reason != ReasonRunRefused || utf8.RuneCountInString(newest.Message) > maxRefusalMessage {
		t.Errorf("newest refusal %s %s, message of %d characters; want %s %s, at most %d (the CRD counts characters)", newest.SHA, newest.Reason, utf8.RuneCountInString(newest.Message),
			c2, ReasonRunRefused, maxRefusalMessage)
	}
	if n := len(w.drain()); n != taugridv1.MaxRefusedRefs+3 {
		t.Errorf("%d events, want one per refusal (%d)", n, taugridv1.MaxRefusedRefs+3)
	}
}

// TestTheRefsRefusedCondition names the newest few refusals and counts
// the rest; none removes it.
func TestTheRefsRefusedCondition(t *testing.T) {
	cases := map[string]struct {
		refused int
		want    string // the message; "" for no condition
	}{
		"none": {},
		"one":  {refused: 1, want: "1 refs request runs that will not start (fix them and push again, or delete them): refs/tau/runs/r-0 at 111111111111: bad"},
		"six: five named, one counted": {refused: 6, want: "6 refs request runs that will not start (fix them and push again, or delete them): " +
			"refs/tau/runs/r-0 at 111111111111: bad; refs/tau/runs/r-1 at 111111111111: bad; refs/tau/runs/r-2 at 111111111111: bad; " +
			"refs/tau/runs/r-3 at 111111111111: bad; refs/tau/runs/r-4 at 111111111111: bad; and 1 more in status.refusedRefs"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepoWorld(t, nil)
			repo := research().Obj()
			w.r.setCondition(repo, taugridv1.ConditionRefsRefused, metav1.ConditionTrue, "Old", "stale")
			for i := range tc.refused {
				repo.Status.RefusedRefs = append(repo.Status.RefusedRefs, taugridv1.RefusedRef{Ref: fmt.Sprintf("refs/tau/runs/r-%d", i),
					SHA: c1, Commit: c1, Reason: ReasonBadRunRequest, Message: "bad"})
			}
			w.r.SetRefusedCondition(repo)
			got := ""
			for _, c := range repo.Status.Conditions {
				got = c.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RefsRefused message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServerCauses: the API server's field causes, else its message.
func TestServerCauses(t *testing.T) {
	gk := taugridv1.GroupVersion.WithKind("TauRun").GroupKind()
	cases := map[string]struct {
		err  error
		want string
	}{
		"field causes, joined": {err: apierrors.NewInvalid(gk, "r", field.ErrorList{
			field.Invalid(field.NewPath("spec", "target"), "X", "not a name"), field.Required(field.NewPath("spec", "commit"), "")}),
			want: `spec.target: Invalid value: "X": not a name; spec.commit: Required value`},
		"a bad request without causes: its message": {err: apierrors.NewBadRequest("the body is not JSON"), want: "the body is not JSON"},
		"not an API error":                          {err: errors.New("boom"), want: "boom"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, serverCauses(tc.err)); diff != "" {
				t.Errorf("serverCauses (-want +got):\n%s", diff)
			}
		})
	}
}
