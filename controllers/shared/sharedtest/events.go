package sharedtest

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

// Drain is every event rec recorded since the last Drain, each as
// "Type Reason Note".
func Drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Reasons is each event's type and reason, without its note.
func Reasons(evs []string) []string {
	var out []string
	for _, e := range evs {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

// Conditions are conds as sorted "Type=Status/Reason", to compare with
// cmp.Diff.
func Conditions(conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		out = append(out, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	slices.Sort(out)
	return out
}
