package repository

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taugrid/taugrid/controllers/shared"
)

// One bad ref is one bad ref: a ref whose run cannot be created as asked is
// recorded in status.refusedRefs, raised as a Warning event and listed in
// the RefsRefused condition, its commit gets a failure status (see
// RefusalReporter), and the poll goes on to record every ref, so later refs
// still start and cancel runs.

// refusedRun is the API server refusing the TauRun a ref requests: an
// error of that ref, not of the repository.
type refusedRun struct {
	name string
	err  error
}

func (e *refusedRun) Error() string {
	return fmt.Sprintf("the cluster refused TauRun %s: %s", e.name, serverCauses(e.err))
}

func (e *refusedRun) Unwrap() error { return e.err }

// serverCauses is the API server's complaint in one line: its field causes
// when it gives them, else its message.
func serverCauses(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return err.Error()
	}
	var parts []string
	for _, c := range status.Status().Details.Causes {
		parts = append(parts, strings.TrimSpace(c.Field+": "+c.Message))
	}
	return strings.Join(parts, "; ")
}

// maxRefusalMessage bounds one refused ref's message, as the CRD does.
const maxRefusalMessage = 1024

// Refuse records a refused ref (replacing an older refusal of the same
// ref), newest first and at most MaxRefusedRefs, and raises an event.
func (r *RepositoryReconciler) Refuse(repo *taugridv1.TauRepository, p gitsource.Problem, reason string) {
	msg := forge.Shorten(p.Err.Error(), maxRefusalMessage)
	r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, reason, "Poll", "%s at %s: %s", p.Ref, shared.Short(p.Commit), msg)
	st := &repo.Status
	st.RefusedRefs = slices.DeleteFunc(st.RefusedRefs, func(o taugridv1.RefusedRef) bool { return o.Ref == p.Ref })
	st.RefusedRefs = slices.Insert(st.RefusedRefs, 0, taugridv1.RefusedRef{Ref: p.Ref, SHA: p.SHA, Commit: p.Commit,
		Reason: reason, Message: msg, Time: metav1.NewTime(r.Clock.Now())})
	if len(st.RefusedRefs) > taugridv1.MaxRefusedRefs {
		st.RefusedRefs = st.RefusedRefs[:taugridv1.MaxRefusedRefs]
	}
}

// keepRefused drops the refusals of refs that were deleted or moved since:
// a moved ref is judged anew by this poll.
func keepRefused(repo *taugridv1.TauRepository, cur gitsource.RefSet) {
	st := &repo.Status
	st.RefusedRefs = slices.DeleteFunc(st.RefusedRefs, func(o taugridv1.RefusedRef) bool {
		ref, ok := cur[o.Ref]
		return !ok || ref.SHA != o.SHA
	})
	if len(st.RefusedRefs) == 0 {
		st.RefusedRefs = nil
	}
}

// maxConditionRefs is how many refused refs the condition's message names.
const maxConditionRefs = 5

// SetRefusedCondition sets RefsRefused from status.refusedRefs: True naming
// the newest few, removed when there are none.
func (r *RepositoryReconciler) SetRefusedCondition(repo *taugridv1.TauRepository) {
	refused := repo.Status.RefusedRefs
	if len(refused) == 0 {
		apimeta.RemoveStatusCondition(&repo.Status.Conditions, taugridv1.ConditionRefsRefused)
		return
	}
	var parts []string
	for _, o := range refused[:min(len(refused), maxConditionRefs)] {
		parts = append(parts, fmt.Sprintf("%s at %s: %s", o.Ref, shared.Short(o.Commit), forge.Shorten(o.Message, 160)))
	}
	msg := fmt.Sprintf("%d refs request runs that will not start (fix them and push again, or delete them): %s",
		len(refused), strings.Join(parts, "; "))
	if extra := len(refused) - maxConditionRefs; extra > 0 {
		msg += fmt.Sprintf("; and %d more in status.refusedRefs", extra)
	}
	r.setCondition(repo, taugridv1.ConditionRefsRefused, metav1.ConditionTrue, refused[0].Reason, msg)
}
