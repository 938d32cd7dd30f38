package integration

import (
	"testing"
	"testing/fstest"

	"github.com/taugrid/taugrid/render"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	platformctrl "github.com/taugrid/taugrid/controllers/platform"
)

// From the attacker's side, on a worker: before a dispatched run's own
// fence is copied there, its pods are closed to everyone (another
// tenant's pod, a pod claiming the run's label, the tenant's other runs),
// and once the fence is there they take their own run's connections
// only. The platform applies the closing policy in every tenant
// namespace the worker gets, after the namespace itself.
func TestAWorkersRunPodsAreClosedUntilTheirFenceArrives(t *testing.T) {
	u := func(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		o.SetAPIVersion("kueue.x-k8s.io/v1beta2")
		if kind == "Namespace" {
			o.SetAPIVersion("v1")
		}
		o.SetKind(kind)
		o.SetNamespace(ns)
		o.SetName(name)
		return o
	}
	objs := []*unstructured.Unstructured{
		u("ClusterQueue", "", "cq-a", map[string]any{}),
		u("ClusterQueue", "", "cq-b", map[string]any{}),
		u("Namespace", "", "team-a", nil),
		u("Namespace", "", "team-b", nil),
		u("LocalQueue", "team-a", "runs", map[string]any{"clusterQueue": "cq-a"}),
		u("LocalQueue", "team-b", "runs", map[string]any{"clusterQueue": "cq-b"}),
	}
	plan, errs := platformctrl.WorkerObjects(fstest.MapFS{}, objs, render.WorkerCluster{Name: "east", ClusterQueues: []string{"cq-a"}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var closed *networkingv1.NetworkPolicy
	sawNamespace := false
	for _, o := range plan {
		switch {
		case o.GetKind() == "Namespace" && o.GetName() == "team-a":
			sawNamespace = true
		case o.GetKind() == "NetworkPolicy":
			if !sawNamespace {
				t.Errorf("the closing policy comes before its namespace in the plan")
			}
			if o.GetNamespace() != "team-a" || o.GetName() != platformctrl.ClosedToStrangersPolicy {
				t.Errorf("a closing policy %s/%s; want only team-a's (team-b is not dispatched to east)", o.GetNamespace(), o.GetName())
			}
			closed = &networkingv1.NetworkPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, closed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if closed == nil {
		t.Fatalf("the worker's plan has no closing policy: %v", plan)
	}
	run := labels.Set{render.LabelRun: "research-train-1", render.LabelManagedBy: render.ManagedBy}
	if !selects(t, closed.Spec.PodSelector, run) {
		t.Fatalf("the closing policy does not select a run's pod")
	}
	if selects(t, closed.Spec.PodSelector, labels.Set{"app": "notebook"}) {
		t.Errorf("the closing policy selects a pod that is no run's (the tenant's own pods are theirs to fence)")
	}
	fence := &networkingv1.NetworkPolicy{}
	fence.Namespace = "team-a"
	fence.Spec.PodSelector.MatchLabels = map[string]string{render.LabelRun: "research-train-1"}
	fence.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &fence.Spec.PodSelector}}}}
	strangers := map[string]struct {
		ns     string
		labels labels.Set
	}{
		"tenant B's run":                       {"team-b", labels.Set{render.LabelRun: "research-x-1"}},
		"tenant B's pod with this run's label": {"team-b", run},
		"tenant A's other run":                 {"team-a", labels.Set{render.LabelRun: "research-other-1"}},
		"an unlabelled pod of tenant A":        {"team-a", labels.Set{}},
	}
	for name, s := range strangers {
		if admits(t, closed, s.ns, s.labels) {
			t.Errorf("before the run's fence arrives, %s can connect to its pods", name)
		}
		if admits(t, closed, s.ns, s.labels) || admits(t, fence, s.ns, s.labels) {
			t.Errorf("with the run's fence there, %s can connect to its pods", name)
		}
	}
	if admits(t, closed, "team-a", run) {
		t.Errorf("the closing policy lets in the run's own pods: it should only close")
	}
	if !admits(t, fence, "team-a", run) {
		t.Errorf("with its fence there, the run's own pods cannot reach each other")
	}
}
