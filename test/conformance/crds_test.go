package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCRDsAreServedInTheTauCategory is `kubectl get tau`: the API server
// lists TauGrid's three kinds under the category "tau".
func TestCRDsAreServedInTheTauCategory(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion(taugridv1.GroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	var inTau []string
	for _, r := range list.APIResources {
		if slices.Contains(r.Categories, "tau") {
			inTau = append(inTau, r.Kind+"/"+strings.Join(r.ShortNames, ","))
		}
	}
	slices.Sort(inTau)
	want := []string{"TauPlatform/tplat", "TauRepository/trepo", "TauRun/trun"}
	if !slices.Equal(want, inTau) {
		t.Errorf("kinds in category tau = %v, want %v", inTau, want)
	}
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := taugridv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTauRunSpecIsImmutableButCancellable checks the CEL rules: a run's
// identity never changes, and cancellation can be requested but not undone.
func TestTauRunSpecIsImmutableButCancellable(t *testing.T) {
	c, err := client.New(env.Config, client.Options{Scheme: newScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol := tenantWithQuota(t, 1)
	run := &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Name: "immutable", Namespace: pol.Tenant("team-a").Namespace},
		Spec: taugridv1.TauRunSpec{
			Repository: "research",
			Trigger:    taugridv1.Trigger{Kind: taugridv1.TriggerRunTag, Ref: "refs/tags/run/a"},
			Commit:     strings.Repeat("a", 40),
			Target:     "default",
		},
	}
	if err := c.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	moved := run.DeepCopy()
	moved.Spec.Commit = strings.Repeat("b", 40)
	if err := c.Update(ctx, moved); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing the commit: err = %v, want an immutability error", err)
	}
	run.Spec.Cancel = true
	if err := c.Update(ctx, run); err != nil {
		t.Fatalf("requesting cancellation: %v", err)
	}
	run.Spec.Cancel = false
	if err := c.Update(ctx, run); err == nil || !strings.Contains(err.Error(), "cannot be undone") {
		t.Errorf("undoing cancellation: err = %v, want it refused", err)
	}
	bad := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: run.Namespace}, Spec: run.Spec}
	bad.Spec.Commit = "HEAD"
	if err := c.Create(ctx, bad); err == nil {
		t.Error("a TauRun with commit HEAD was accepted; want a full SHA")
	}
}
