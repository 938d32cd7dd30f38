package shared

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonSealing: an attempt ended and the evidence controller has not
// sealed its bundle yet.
const ReasonSealing = "Sealing"

// Sealing reports a run whose ended attempts wait for the evidence
// controller.
func Sealing(run *taugridv1.TauRun) bool {
	c := apimeta.FindStatusCondition(run.Status.Conditions, ConditionEvidence)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ReasonSealing
}
