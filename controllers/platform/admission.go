package platform

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// PolicyCheckName is platform's AdmissionCheck: one per platform, as each
// applies and prunes only its own objects.
func PolicyCheckName(platform string) string { return taugridv1.PolicyAdmissionCheck + "-" + platform }

// withPolicyCheck puts TauGrid's admission check on every ClusterQueue of
// objs, and the AdmissionCheck itself first: Kueue then admits in those
// queues only what the admission controller says TauGrid rendered,
// whoever created it.
func withPolicyCheck(p *taugridv1.TauPlatform, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	name := PolicyCheckName(p.Name)
	check := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueue.GroupVersion.String(),
		"kind":       "AdmissionCheck",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"controllerName": taugridv1.PolicyCheckController},
	}}
	out := make([]*unstructured.Unstructured, 0, len(objs)+1)
	out = append(out, check)
	for _, u := range objs {
		if u.GetKind() != "ClusterQueue" {
			out = append(out, u)
			continue
		}
		d := u.DeepCopy()
		rules, _, _ := unstructured.NestedSlice(d.Object, "spec", "admissionChecksStrategy", "admissionChecks")
		rules = append(rules, map[string]any{"name": name})
		if err := unstructured.SetNestedSlice(d.Object, rules, "spec", "admissionChecksStrategy", "admissionChecks"); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", u.GetName(), err)
		}
		out = append(out, d)
	}
	return out, nil
}
