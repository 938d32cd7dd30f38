package run

import (
	"context"
	"encoding/json"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taugrid/taugrid/controllers/shared"
)

// reconcileSignature records the repository reconciler's signature check
// as status.signature and fails, without submitting, a run that is not
// signed by an allowed key, or that the repository requires signed but
// that carries no check (a TauRun made by hand). It reports whether the
// run was refused. Sets Stalled and Ready=False on refusal.
func (r *RunReconciler) reconcileSignature(ctx context.Context, run *taugridv1.TauRun) (bool, error) {
	if run.Status.Signature == nil {
		if raw, ok := run.Annotations[taugridv1.AnnotationSignature]; ok {
			sig := &taugridv1.SignatureStatus{}
			if err := json.Unmarshal([]byte(raw), sig); err != nil {
				sig = &taugridv1.SignatureStatus{Reason: fmt.Sprintf("refused: %s: the signature check recorded on the run does not parse", run.Spec.Trigger.Ref)}
			}
			run.Status.Signature = sig
		} else if required, err := r.signatureRequired(ctx, run); err != nil || !required {
			return false, err
		} else {
			run.Status.Signature = &taugridv1.SignatureStatus{Reason: fmt.Sprintf(
				"refused: %s was not checked for a signature, which repository %s requires", run.Spec.Trigger.Ref, run.Spec.Repository)}
		}
	}
	if sig := run.Status.Signature; !sig.Verified {
		r.fail(run, shared.ReasonSignatureRefused, sig.Reason)
		return true, nil
	}
	return false, nil
}

func (r *RunReconciler) signatureRequired(ctx context.Context, run *taugridv1.TauRun) (bool, error) {
	repo := &taugridv1.TauRepository{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo)
	if apierrors.IsNotFound(err) {
		return false, nil // planning fails the run for its missing repository
	}
	return err == nil && repo.Spec.Verification != nil, err
}
