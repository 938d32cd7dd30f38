package platform

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTheSecretsGrantIsBoundInEachTenantNamespaceAndNoOther: with a grant,
// each tenant namespace gets one RoleBinding of the grant's role to the
// controller; a binding this platform made in a namespace no tenant names
// any more is pruned, one it did not make is left; without a grant nothing
// is bound and what was bound goes.
func TestTheSecretsGrantIsBoundInEachTenantNamespaceAndNoOther(t *testing.T) {
	grant := &SecretsGrant{ClusterRole: "tau-controller-tenant-secrets", ServiceAccount: "tau-controller", Namespace: "taugrid-system"}
	binding := func(ns string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: SecretsBindingName, Namespace: ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: grant.ClusterRole}}
	}
	for name, tc := range map[string]struct {
		grant *SecretsGrant
		holds []string
	}{
		"granted": {grant, []string{"team-a/tau-controller-secrets by default", "team-b/tau-controller-secrets by default", "team-c/tau-controller-secrets by "}},
		"off":     {nil, []string{"team-c/tau-controller-secrets by "}},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, nil, platform().Obj(),
				appliedBy(binding("team-gone"), platformName), // a tenant the policy dropped
				binding("team-c")) // the cluster admin's own
			w.r.Secrets = tc.grant
			w.git.push(sha("a"), exampleTree(t, nil))
			w.mustReconcile(t)

			var l rbacv1.RoleBindingList
			if err := w.c.List(context.Background(), &l); err != nil {
				t.Fatal(err)
			}
			var holds []string
			for _, rb := range l.Items {
				holds = append(holds, rb.Namespace+"/"+rb.Name+" by "+rb.Labels[taugridv1.LabelPlatform])
				if rb.Labels[taugridv1.LabelPlatform] == "" {
					continue
				}
				want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tau-controller", Namespace: "taugrid-system"}}
				if diff := cmp.Diff(want, rb.Subjects); diff != "" || rb.RoleRef.Name != grant.ClusterRole {
					t.Errorf("%s binds %s to (-want +got):\n%s", rb.Namespace, rb.RoleRef.Name, diff)
				}
			}
			slices.Sort(holds)
			if diff := cmp.Diff(tc.holds, holds); diff != "" {
				t.Errorf("RoleBindings (-want +got):\n%s", diff)
			}
			if !slices.Contains(w.deleted, "RoleBinding team-gone/"+SecretsBindingName) {
				t.Errorf("the dropped tenant's binding was not pruned: deleted %v", w.deleted)
			}
			if msg := condition(w.platform(t), "Ready"); !strings.Contains(msg, "10 Kueue objects") {
				t.Errorf("Ready says %q: the bindings are not Kueue objects", msg)
			}
		})
	}
}
