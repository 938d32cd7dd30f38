package runs

import (
	"context"
	"sort"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// QueueReport is a tenant's view of its queues, for researchers who cannot
// read ClusterQueues: quota, usage and borrowing, and its runs in order.
type QueueReport struct {
	SchemaVersion int         `json:"schema_version"`
	Namespace     string      `json:"namespace"`
	Queues        []QueueView `json:"queues"`
	Runs          []QueuedRun `json:"runs"`
}

// QueueView is one LocalQueue and the ClusterQueue behind it.
type QueueView struct {
	LocalQueue   string      `json:"local_queue"`
	ClusterQueue string      `json:"cluster_queue"`
	Cohort       string      `json:"cohort,omitempty"`
	Pending      int32       `json:"pending"`
	Admitted     int32       `json:"admitted"`
	Quota        []QuotaView `json:"quota"`
}

// QuotaView is one resource of one flavor.
type QuotaView struct {
	Flavor         string `json:"flavor"`
	Resource       string `json:"resource"`
	Nominal        string `json:"nominal"`
	BorrowingLimit string `json:"borrowing_limit"`
	InUse          string `json:"in_use"`
	Borrowed       string `json:"borrowed"`
}

// QueuedRun is a run that holds or waits for quota.
type QueuedRun struct {
	Run      string             `json:"run"`
	Ref      string             `json:"ref"`
	Queue    string             `json:"queue"`
	Phase    taugridv1.RunPhase `json:"phase"`
	Position int32              `json:"position,omitempty"`
	Message  string             `json:"message"`
}

// ReportQueue reads a namespace's queues and active runs.
func ReportQueue(ctx context.Context, c client.Reader, ns string) (*QueueReport, error) {
	rep := &QueueReport{SchemaVersion: 1, Namespace: ns, Queues: []QueueView{}, Runs: []QueuedRun{}}
	var lqs kueue.LocalQueueList
	if err := c.List(ctx, &lqs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	sort.Slice(lqs.Items, func(i, j int) bool { return lqs.Items[i].Name < lqs.Items[j].Name })
	for _, lq := range lqs.Items {
		v := QueueView{LocalQueue: lq.Name, ClusterQueue: string(lq.Spec.ClusterQueue), Pending: lq.Status.PendingWorkloads, Admitted: lq.Status.AdmittedWorkloads, Quota: []QuotaView{}}
		cq := &kueue.ClusterQueue{}
		if err := c.Get(ctx, client.ObjectKey{Name: string(lq.Spec.ClusterQueue)}, cq); err == nil {
			v.Cohort = string(cq.Spec.CohortName)
			v.Quota = quotaRows(cq)
		}
		rep.Queues = append(rep.Queues, v)
	}
	var runs taugridv1.TauRunList
	if err := c.List(ctx, &runs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	SortNewestFirst(runs.Items)
	for i := len(runs.Items) - 1; i >= 0; i-- { // oldest first
		r := runs.Items[i]
		w := r.Status.Workload
		if w == nil || r.Status.Phase.Final() {
			continue
		}
		qr := QueuedRun{Run: r.Name, Ref: r.Spec.Trigger.Ref, Queue: w.Queue, Phase: r.Status.Phase, Message: r.Status.Message}
		if w.Position != nil {
			qr.Position = *w.Position
		}
		rep.Runs = append(rep.Runs, qr)
	}
	// Holding quota first, then waiting in queue order.
	sort.SliceStable(rep.Runs, func(i, j int) bool {
		a, b := rep.Runs[i], rep.Runs[j]
		wa, wb := a.Phase == taugridv1.PhaseQueued, b.Phase == taugridv1.PhaseQueued
		if wa != wb {
			return !wa
		}
		return wa && a.Position > 0 && (b.Position == 0 || a.Position < b.Position)
	})
	return rep, nil
}

// quotaRows lists each flavor's resources of a ClusterQueue: nominal quota,
// borrowing limit, and what is reserved now.
func quotaRows(cq *kueue.ClusterQueue) []QuotaView {
	used := map[string]kueue.ResourceUsage{}
	for _, fu := range cq.Status.FlavorsReservation {
		for _, ru := range fu.Resources {
			used[string(fu.Name)+"/"+string(ru.Name)] = ru
		}
	}
	rows := []QuotaView{}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.Name == taugridv1.ResourceHostSlot {
					continue // TauGrid's own, of a quota nothing reaches: the hosts are the limit
				}
				u := used[string(f.Name)+"/"+string(r.Name)]
				limit := "unlimited"
				if cq.Spec.CohortName == "" {
					limit = "none"
				}
				if r.BorrowingLimit != nil {
					limit = r.BorrowingLimit.String()
				}
				rows = append(rows, QuotaView{Flavor: string(f.Name), Resource: string(r.Name), Nominal: r.NominalQuota.String(),
					BorrowingLimit: limit, InUse: u.Total.String(), Borrowed: u.Borrowed.String()})
			}
		}
	}
	return rows
}
