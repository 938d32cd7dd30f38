package impact

import (
	"context"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Read reads from the cluster what a preview needs: the runs that have
// not ended (with their current Kueue Workloads), the repositories, what
// each ClusterQueue's admitted workloads hold, and the nodes. rendered is
// the policy the runs were rendered under, which names their profiles.
func Read(ctx context.Context, c client.Reader, rendered *render.Policy) (Cluster, error) {
	var out Cluster
	var runs taugridv1.TauRunList
	if err := c.List(ctx, &runs, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("listing runs: %w", err)
	}
	// One list of the Workloads, not a read per run: 10,000 runs cost one
	// pass over the cache (BenchmarkPreviewingAPlatformPullRequestAtScale).
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("listing Kueue Workloads: %w", err)
	}
	byName := make(map[types.NamespacedName]*kueue.Workload, len(wls.Items))
	for i := range wls.Items {
		byName[client.ObjectKeyFromObject(&wls.Items[i])] = &wls.Items[i]
	}
	for i := range runs.Items {
		run := &runs.Items[i]
		if run.Status.Phase.Final() {
			continue
		}
		var wl *kueue.Workload // nil: not submitted yet, or gone
		if ws := run.Status.Workload; ws != nil && ws.Workload != "" {
			wl = byName[types.NamespacedName{Namespace: run.Namespace, Name: ws.Workload}]
		}
		out.Runs = append(out.Runs, RunOf(run, wl, rendered))
	}
	var repos taugridv1.TauRepositoryList
	if err := c.List(ctx, &repos); err != nil {
		return out, fmt.Errorf("listing repositories: %w", err)
	}
	out.Repositories = repos.Items
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs); err != nil {
		return out, fmt.Errorf("listing ClusterQueues: %w", err)
	}
	out.Usage = usage(cqs.Items)
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return out, fmt.Errorf("listing nodes: %w", err)
	}
	out.Nodes = nodes.Items
	return out, nil
}

// usage is what each ClusterQueue's admitted workloads hold, by flavor
// and resource.
func usage(cqs []kueue.ClusterQueue) map[string]map[string]corev1.ResourceList {
	out := map[string]map[string]corev1.ResourceList{}
	for _, cq := range cqs {
		byFlavor := map[string]corev1.ResourceList{}
		for _, f := range cq.Status.FlavorsReservation {
			rl := corev1.ResourceList{}
			for _, r := range f.Resources {
				rl[r.Name] = r.Total
			}
			byFlavor[string(f.Name)] = rl
		}
		out[cq.Name] = byFlavor
	}
	return out
}
