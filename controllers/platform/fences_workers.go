package platform

import (
	"github.com/taugrid/taugrid/render"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/taugrid/taugrid/controllers/shared"
)

// ClosedToStrangersPolicy names the NetworkPolicy the platform reconciler
// applies in every tenant namespace of a worker cluster.
const ClosedToStrangersPolicy = "taugrid-runs-closed"

// closedToStrangers shuts every run pod of namespace ns off from all
// ingress. On a worker the run's own fence (its pods let in their own
// run) is copied only once the run reconciler sees where MultiKueue
// dispatched it, a resync after its pods may have started; until then
// this policy keeps those pods closed rather than open. Ingress policies
// add up, so once the run's fence is there its pods take their own run's
// connections and nobody else's.
func closedToStrangers(ns string) (*unstructured.Unstructured, error) {
	return shared.ToUnstructured(&networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: ClosedToStrangersPolicy, Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: render.LabelRun, Operator: metav1.LabelSelectorOpExists},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	})
}
