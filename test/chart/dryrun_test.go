package chart

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestEveryRenderedObjectPassesAStrictServerSideDryRun creates each object
// the chart renders, for the default values and for every option turned on,
// as a dry run with strict field validation on the real API server: an
// unknown or misspelled field, a wrong type or an invalid value fails.
// The CRDs are the chart's own (crds/), installed first as Helm does, and a
// minimal stand-in for the Prometheus Operator's (testdata/), so the chart
// renders as on a cluster that serves monitoring.coreos.com/v1.
func TestEveryRenderedObjectPassesAStrictServerSideDryRun(t *testing.T) {
	e := apiServer(t)
	ctx := context.Background()
	// The release's namespace, and Kueue's (a MultiKueue manager's roles
	// are there).
	for _, name := range []string{Namespace, "kueue-system"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for name, values := range valueSets() {
		t.Run(name, func(t *testing.T) {
			r, err := RenderOn(Namespace, values, MonitoringAPIs...)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range r.Objects {
				err := e.Client.Create(ctx, u.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
				if err != nil {
					t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}
