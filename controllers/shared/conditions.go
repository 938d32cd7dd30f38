package shared

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetCondition sets one kstatus-style condition, stamped with the object's
// generation; the transition time changes only when the status does.
func SetCondition(conds *[]metav1.Condition, generation int64, now time.Time, t string, s metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: s, Reason: reason,
		Message: msg, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
}
