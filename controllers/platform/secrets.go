package platform

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/taugrid/taugrid/render"
)

// SecretsBindingName names the RoleBinding the platform makes in each
// tenant namespace.
const SecretsBindingName = "tau-controller-secrets"

// grantKinds are the objects the platform makes for a SecretsGrant, pruned
// like the queues once a tenant leaves the policy.
var grantKinds = []schema.GroupVersionKind{rbacv1.SchemeGroupVersion.WithKind("RoleBinding")}

// SecretsGrant is how the controller comes to read Secrets in the tenant
// namespaces and nowhere else: the platform binds ClusterRole, which grants
// get on Secrets, to the controller's ServiceAccount in each namespace its
// policy names. The chart's ClusterRole for the controller grants no
// Secrets, and only bind on this one role, so a namespace no policy names
// (kube-system, another product's) is never read.
type SecretsGrant struct {
	ClusterRole    string
	ServiceAccount string
	// Namespace is the ServiceAccount's.
	Namespace string
}

// bindings are the grant's RoleBindings, one per tenant namespace of pol.
func (g *SecretsGrant) bindings(pol *render.Policy) []*unstructured.Unstructured {
	if g == nil || g.ClusterRole == "" {
		return nil
	}
	var namespaces []string
	for _, t := range pol.Tenants {
		namespaces = append(namespaces, t.Namespace)
	}
	slices.Sort(namespaces)
	var out []*unstructured.Unstructured
	for _, ns := range slices.Compact(namespaces) {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": rbacv1.SchemeGroupVersion.String(),
			"kind":       "RoleBinding",
			"metadata":   map[string]any{"name": SecretsBindingName, "namespace": ns},
			"roleRef":    map[string]any{"apiGroup": rbacv1.GroupName, "kind": "ClusterRole", "name": g.ClusterRole},
			"subjects": []any{map[string]any{
				"kind": rbacv1.ServiceAccountKind, "name": g.ServiceAccount, "namespace": g.Namespace}},
		}})
	}
	return out
}
