package platform

import (
	"context"
	"fmt"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/policy/impact"
)

// Reasons of the events that explain a change of the policy in force.
const (
	ReasonPolicyImpact = "PolicyImpact"
	ReasonStrandsRuns  = "PolicyStrandsRuns"
)

// maxStrandedNames bounds status.lastChange.strandedRuns.
const maxStrandedNames = 20

// The preview reads every run that has not ended, its Workload, the
// repositories, the ClusterQueues' usage and the nodes, from the cache.
// +kubebuilder:rbac:groups=taugrid.dev,resources=taururns;taurepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// explainChange records what changing the policy in force from commit
// from to the policy just applied (lp, whose kueue/ declares queues) does
// to the teams: status.lastChange and an event, a warning when queued
// runs could never start. A push straight to the watched branch had no
// review; this is its preview, after the fact. It is an explanation, not
// a gate: a policy before it that cannot be read again or a cluster read
// that fails leaves the last explanation as it was, and says so in the
// log.
func (r *PlatformReconciler) explainChange(ctx context.Context, p *taugridv1.TauPlatform, from, to string, lp *policy.LoadedPolicy, queues []*unstructured.Unstructured) {
	if from == "" || from == to {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	before, err := r.Policies.Load(ctx, p, from)
	if err != nil {
		log.Info("no impact preview of the policy change: the policy before it does not load", "from", from, "error", err.Error())
		return
	}
	beforeQueues, err := policy.LoadQueues(before.Tree, before.Policy)
	if err != nil {
		log.Info("no impact preview of the policy change: the queues before it do not load", "from", from, "error", err.Error())
		return
	}
	cluster, err := impact.Read(ctx, r.Client, before.Policy)
	if err != nil {
		log.Info("no impact preview of the policy change: reading the cluster failed", "error", err.Error())
		return
	}
	old := &impact.Policy{Policy: before.Policy, Queues: beforeQueues, Commit: shared.Short(from)}
	next := &impact.Policy{Policy: lp.Policy, Queues: queues, Commit: shared.Short(to)}
	pv := impact.Compute(old, next, cluster, false)
	change := &taugridv1.PolicyChange{From: from, To: to, Summary: pv.Summary, Stranded: pv.Stranded,
		StrandedRuns: stranded(pv, maxStrandedNames), Time: metav1.NewTime(r.Clock.Now())}
	p.Status.LastChange = change
	kind, reason := corev1.EventTypeNormal, ReasonPolicyImpact
	note := fmt.Sprintf("policy %s → %s: %s", shared.Short(from), shared.Short(to), pv.Summary)
	if pv.Stranded {
		kind, reason = corev1.EventTypeWarning, ReasonStrandsRuns
		note += "; never start: " + strings.Join(change.StrandedRuns, ", ")
	}
	r.Recorder.Eventf(p, nil, kind, reason, "Apply", "%s", note)
}

// stranded names up to n of the runs the preview says would never
// start, as namespace/name, and how many more there are.
func stranded(pv *impact.Preview, n int) []string {
	var out []string
	more := 0
	for _, t := range pv.Tenants {
		for _, run := range t.Runs {
			if run.Outcome != impact.NeverStarts {
				continue
			}
			if len(out) == n {
				more++
				continue
			}
			out = append(out, run.Namespace+"/"+run.Name)
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out
}
