// Package impact previews what a change to the platform policy does to the
// teams before it takes effect: quotas before and after, the profiles,
// images, priorities and queues taken away, what becomes of each run
// queued or running, and the nodes no flavor covers any more. Pure
// functions over two loaded policies and the objects read from the
// cluster; tau platform diff and the platform controller call them.
package impact

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// Run is what the preview knows of a TauRun that has not ended: from the
// TauRun and from its Kueue Workload (RunOf).
type Run struct {
	Namespace, Name string
	// Repository is the TauRepository's name; RepositoryURL its git URL,
	// "" when unknown.
	Repository, RepositoryURL string
	Phase                     taugridv1.RunPhase
	// Admitted: Kueue admitted the current attempt; it holds its quota.
	Admitted bool
	// Submitted: the run has a Kueue Workload, whose fields below are
	// known; a run not submitted yet is resolved under whatever policy is
	// in force when it is.
	Submitted bool
	// Profiles are the compute profiles the run may be using: one when
	// known, several when its pods fit more than one.
	Profiles []string
	// Images are its containers' images, as its pods get them.
	Images []string
	// PriorityClass is its Kueue WorkloadPriorityClass; "" for none.
	PriorityClass string
	// Queue is its LocalQueue.
	Queue string
	// NodeSelector is its main pods' node selector.
	NodeSelector map[string]string
	// Requests are what all its pods ask for together; GPUs and Pods
	// count its GPUs (of any GPU resource) and pods.
	Requests   corev1.ResourceList
	GPUs, Pods int64
}

// Cluster is what the preview reads from the cluster.
type Cluster struct {
	// Runs are the runs that have not ended.
	Runs []Run
	// Repositories are the TauRepositories, for their URLs and tenants.
	Repositories []taugridv1.TauRepository
	// Usage is what each ClusterQueue's admitted workloads hold now, by
	// ClusterQueue, flavor and resource (ClusterQueue status).
	Usage map[string]map[string]corev1.ResourceList
	// Nodes are the cluster's nodes, by name and labels.
	Nodes []corev1.Node
}

// Outcome is what a policy change does to one run.
type Outcome string

// The outcomes, from harmless to stranding.
const (
	// KeepsRunning: an admitted run goes on; only a retry is judged anew.
	KeepsRunning Outcome = "keeps running"
	// StartsAsSubmitted: a queued run is admitted as it was rendered, but
	// a retry would be refused.
	StartsAsSubmitted Outcome = "starts as submitted"
	// RefusedOnRetry: a running run's retry would be refused.
	RefusedOnRetry Outcome = "would be refused on retry"
	// NeverStarts: a queued run could never be admitted, or a run not yet
	// submitted would be refused: the change strands it.
	NeverStarts Outcome = "would never start"
)

// RunImpact is one run the change touches.
type RunImpact struct {
	Namespace, Name, Repository string
	Phase                       taugridv1.RunPhase
	Outcome                     Outcome
	// Why lists the reasons, in the policy's words.
	Why []string
}

// QuotaChange is one quota of one ClusterQueue that changes; Before or
// After is "" where the quota is not declared.
type QuotaChange struct {
	ClusterQueue, Flavor, Resource string
	Before, After                  string
	// InUse is what admitted workloads hold of it now, "" when unknown.
	InUse string
	// Below says the new quota is under what is in use now.
	Below bool
}

// Removal is something a tenant's runs may use no more, or less of.
type Removal struct {
	// Kind is profile, image, priority, queue, repository or tenant.
	Kind   string
	Name   string
	Detail string
}

// QueueMove is a repository whose runs would go to another ClusterQueue.
type QueueMove struct {
	Repository    string
	Before, After string
}

// TenantImpact is what the change does to one tenant.
type TenantImpact struct {
	Tenant    string
	Quotas    []QuotaChange
	Removals  []Removal
	Moves     []QueueMove
	Runs      []RunImpact
	Unchanged int // runs the change does not touch
}

// Preview is the impact of a policy change.
type Preview struct {
	Tenants []TenantImpact
	// Platform are the removals that touch every tenant (images).
	Platform []Removal
	// OtherQuotas are quota changes of ClusterQueues no tenant submits to.
	OtherQuotas []QuotaChange
	// UncoveredNodes are nodes a flavor covered before and none covers
	// after.
	UncoveredNodes []string
	// UnservedFlavors are flavors the change adds or relabels that no
	// node carries.
	UnservedFlavors []string
	// Stranded: the change strands runs (NeverStarts).
	Stranded bool
	// Accepted: the caller accepted stranding them.
	Accepted bool
	// Summary is one line of at most MaxSummary characters; Body is
	// Markdown.
	Summary, Body string
}

// Failing reports a preview that strands runs and was not accepted.
func (p *Preview) Failing() bool { return p.Stranded && !p.Accepted }

// MaxSummary bounds Summary: a commit status description.
const MaxSummary = 140

// Compute previews changing old to new on the cluster c; accepted says
// the platform team accepts stranding runs.
func Compute(old, new *Policy, c Cluster, accepted bool) *Preview {
	p := &Preview{Accepted: accepted}
	byTenant := runsByTenant(old, new, c.Runs)
	for _, name := range tenantNames(old, new) {
		t := tenantImpact(old, new, c, name, byTenant[name])
		p.Tenants = append(p.Tenants, t)
		for _, r := range t.Runs {
			p.Stranded = p.Stranded || r.Outcome == NeverStarts
		}
	}
	p.Platform = imageRemovals(old, new)
	p.OtherQuotas = otherQuotas(old, new, c.Usage)
	p.UncoveredNodes = uncoveredNodes(old, new, c.Nodes)
	p.UnservedFlavors = unservedFlavors(old, new, c.Nodes)
	p.Summary = summary(p)
	p.Body = body(p, old, new)
	return p
}
