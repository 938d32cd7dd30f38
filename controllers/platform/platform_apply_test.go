package platform

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/builders"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// exampleApply is the calls applying the example platform repo makes:
// tenant namespaces first, then a dry run of every other object in kind
// order, then the same objects for real.
var exampleApply = func() []string {
	rest := []string{"ResourceFlavor h200", "WorkloadPriorityClass tau-low", "WorkloadPriorityClass tau-normal", "WorkloadPriorityClass tau-high",
		"ClusterQueue team-a", "ClusterQueue team-b", "LocalQueue team-a/runs", "LocalQueue team-b/runs"}
	out := []string{"Namespace team-a", "Namespace team-b"}
	for _, s := range rest {
		out = append(out, "dry-run "+s)
	}
	return append(out, rest...)
}()

// refuse fails the apply of kind name (the dry run, or the real one)
// with err.
func refuse(kind, name string, dryRun bool, err error) func(applyCall) error {
	return func(call applyCall) error {
		if call == (applyCall{Kind: kind, Name: name, DryRun: dryRun}) {
			return err
		}
		return nil
	}
}

// refuseDelete fails the delete of a LocalQueue named name with err.
func refuseDelete(name string, err error) *interceptor.Funcs {
	return &interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if obj.GetName() == name {
			return err
		}
		return c.Delete(ctx, obj, opts...)
	}}
}

// appliedBy labels o as platform's, as applyQueues and dispatch do.
func appliedBy[T client.Object](o T, platform string) T {
	o.SetLabels(map[string]string{taugridv1.LabelPlatform: platform, render.LabelManagedBy: render.ManagedBy})
	return o
}

// TestPlatformApplyAndPrune covers applyQueues, apply, checkOwner and
// prune on the fake client: the order of the calls (namespaces, a dry run
// of the rest, the rest), what the cluster holds afterwards and who it
// says applied it, and each way a commit fails to apply. The fake client's
// dry run checks nothing, so the API server's refusals are made here by
// interceptors; its real merge and Kueue's webhooks are the integration
// tests'.
func TestPlatformApplyAndPrune(t *testing.T) {
	lq := func(name string) string { return "team-a/" + name }
	owned := []string{"ClusterQueue team-a by default", "ClusterQueue team-b by default",
		"LocalQueue team-a/runs by default", "LocalQueue team-b/runs by default",
		"Namespace team-a by default", "Namespace team-b by default"}
	tenantNamespaces := []string{"Namespace team-a by default", "Namespace team-b by default"}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "localqueues"}, "old", nil)
	cases := map[string]struct {
		objs    []client.Object
		faults  *interceptor.Funcs
		refuse  func(applyCall) error
		refused string // in the Stalled condition; "": applied
		applied []string
		deleted []string
		holds   []string // ClusterQueues, LocalQueues and Namespaces held after, by whom
	}{
		"a first apply: tenant namespaces, a dry run of the rest, then the rest": {
			applied: exampleApply, holds: owned,
		},
		"an object nobody labelled is adopted": {
			objs:    []client.Object{builders.MakeClusterQueue("team-a").Obj()},
			applied: exampleApply, holds: owned,
		},
		"an object another TauPlatform applied is never taken over": {
			objs:    []client.Object{builders.MakeClusterQueue("team-a").AppliedBy("research").Obj()},
			refused: "ClusterQueue team-a is managed by TauPlatform research",
			applied: exampleApply[:6],
			holds:   append([]string{"ClusterQueue team-a by research"}, tenantNamespaces...),
		},
		"a dry run the API server refuses applies nothing but the tenant namespaces": {
			refuse: refuse("ClusterQueue", "team-b", true,
				apierrors.NewBadRequest(`admission webhook "vclusterqueue.kb.io" denied the request: spec.resourceGroups[0]: too many flavors`)),
			refused: "ClusterQueue team-b: admission webhook \"vclusterqueue.kb.io\" denied the request",
			applied: exampleApply[:8],
			holds:   tenantNamespaces,
		},
		"an apply refused after its dry run passed leaves what went before applied, and the commit refused": {
			refuse:  refuse("LocalQueue", "team-b/runs", false, apierrors.NewBadRequest("the LocalQueue's ClusterQueue is being deleted")),
			refused: "LocalQueue team-b/runs: the LocalQueue's ClusterQueue is being deleted",
			applied: exampleApply,
			holds:   slices.Concat(owned[:3], tenantNamespaces),
		},
		"what the repo dropped is pruned; what is not this platform's, and namespaces, are kept": {
			objs: []client.Object{
				builders.MakeLocalQueue("old", "team-a", "team-a").AppliedBy("default").Obj(),
				builders.MakeLocalQueue("manual", "team-a", "team-a").Obj(),
				builders.MakeClusterQueue("retired").AppliedBy("default").Obj(),
				builders.MakeClusterQueue("legacy").AppliedBy("research").Obj(),
				appliedBy(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-gone"}}, "default"),
				appliedBy(clusters.Cluster(clusters.Worker{Name: "worker-gone", Secret: "worker-gone-kubeconfig"}), "default"),
			},
			applied: exampleApply,
			deleted: []string{"ClusterQueue retired", "LocalQueue " + lq("old"), "MultiKueueCluster worker-gone"},
			holds: []string{"ClusterQueue legacy by research", "ClusterQueue team-a by default", "ClusterQueue team-b by default",
				"LocalQueue team-a/manual by ", "LocalQueue team-a/runs by default", "LocalQueue team-b/runs by default",
				"Namespace team-a by default", "Namespace team-b by default", "Namespace team-gone by default"},
		},
		"a dropped object already gone is no error": {
			objs:    []client.Object{builders.MakeLocalQueue("old", "team-a", "team-a").AppliedBy("default").Obj()},
			faults:  refuseDelete("old", apierrors.NewNotFound(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "localqueues"}, "old")),
			applied: exampleApply,
			deleted: []string{"LocalQueue " + lq("old")},
			holds:   append(slices.Clone(owned[:2]), "LocalQueue team-a/old by default", owned[2], owned[3], owned[4], owned[5]),
		},
		"a prune the API server forbids refuses the commit, the applied objects stay": {
			objs:    []client.Object{builders.MakeLocalQueue("old", "team-a", "team-a").AppliedBy("default").Obj()},
			faults:  refuseDelete("old", forbidden),
			refused: "pruning LocalQueue team-a/old: " + forbidden.Error(),
			applied: exampleApply,
			deleted: []string{"LocalQueue " + lq("old")},
			holds:   append(slices.Clone(owned[:2]), "LocalQueue team-a/old by default", owned[2], owned[3], owned[4], owned[5]),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.faults, append(tc.objs, platform().Obj())...)
			w.refuseApply = tc.refuse
			w.git.push(sha("a"), exampleTree(t, nil))
			w.mustReconcile(t)
			p := w.platform(t)
			want := []string{"Ready=True/PolicyApplied"}
			if tc.refused != "" {
				want = []string{"Ready=False/InvalidPolicy", "Stalled=True/InvalidPolicy"}
			}
			if diff := cmp.Diff(want, conditions(p)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got := condition(p, taugridv1.ConditionStalled); !strings.Contains(got, tc.refused) {
				t.Errorf("Stalled says %q, want it to say %q", got, tc.refused)
			}
			var applied []string
			for _, a := range w.applied {
				applied = append(applied, a.String())
			}
			if diff := cmp.Diff(tc.applied, applied); diff != "" {
				t.Errorf("applies (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.deleted, w.deleted); diff != "" {
				t.Errorf("deletes (-want +got):\n%s", diff)
			}
			var holds []string
			for _, kind := range []string{"ClusterQueue", "LocalQueue", "Namespace"} {
				for _, o := range w.list(t, kind) {
					holds = append(holds, kind+" "+o)
				}
			}
			if diff := cmp.Diff(tc.holds, holds); diff != "" {
				t.Errorf("the cluster holds (-want +got):\n%s", diff)
			}
		})
	}
}
