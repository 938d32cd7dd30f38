package runs

import (
	"context"
	"sort"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
	// GPUs is what the run's workload asks for.
	GPUs int64 `json:"gpus,omitempty"`
	// Start is a waiting run's estimated start (Estimate): "starts in
	// about 25 min", or why it will not start or cannot be told.
	Start string `json:"start,omitempty"`
	// StartsAt is the estimated start as a time, for scripts; absent when
	// the estimate is not a time.
	StartsAt *time.Time `json:"startsAt,omitempty"`
}

// ReportQueue reads a namespace's queues and active runs.
func ReportQueue(ctx context.Context, c client.Reader, ns string) (*QueueReport, error) {
	return ReportQueueAt(ctx, c, ns, time.Now())
}

// ReportQueueAt is ReportQueue as of now: each waiting run's estimated
// start counts from it.
func ReportQueueAt(ctx context.Context, c client.Reader, ns string, now time.Time) (*QueueReport, error) {
	var runs taugridv1.TauRunList
	if err := c.List(ctx, &runs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	SortNewestFirst(runs.Items)
	return ReportQueueOf(ctx, c, ns, runs.Items, now)
}

// ReportQueueOf is ReportQueueAt over namespace ns's runs already read,
// newest first (SortNewestFirst), for a caller that lists them anyway.
func ReportQueueOf(ctx context.Context, c client.Reader, ns string, items []taugridv1.TauRun, now time.Time) (*QueueReport, error) {
	rep := &QueueReport{SchemaVersion: 1, Namespace: ns, Queues: []QueueView{}, Runs: []QueuedRun{}}
	queues, cqOf := map[string]*Queue{}, map[string]string{}
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
			cqOf[lq.Name] = cq.Name
			if queues[cq.Name] == nil {
				queues[cq.Name] = GPUQueue(cq)
			}
		}
		rep.Queues = append(rep.Queues, v)
	}
	slots := map[string]Slot{}
	for i := len(items) - 1; i >= 0; i-- { // oldest first
		r := items[i]
		w := r.Status.Workload
		if w == nil || r.Status.Phase.Final() {
			continue
		}
		qr := QueuedRun{Run: r.Name, Ref: r.Spec.Trigger.Ref, Queue: w.Queue, Phase: r.Status.Phase, Message: r.Status.Message}
		if w.Position != nil {
			qr.Position = *w.Position
		}
		rep.Runs = append(rep.Runs, qr)
		slots[r.Name] = slot(ctx, c, &r, now)
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
	estimate(rep, queues, cqOf, slots, now)
	return rep, nil
}

// estimate fills each run's GPUs and each waiting run's estimated start,
// queue by queue, in the report's order.
func estimate(rep *QueueReport, queues map[string]*Queue, cqOf map[string]string, slots map[string]Slot, now time.Time) {
	for i := range rep.Runs {
		r := &rep.Runs[i]
		s := slots[r.Run]
		r.GPUs = s.GPUs
		q := queues[cqOf[r.Queue]]
		switch {
		case q == nil:
		case r.Phase == taugridv1.PhaseQueued:
			q.Waiting = append(q.Waiting, s)
		default:
			q.Running = append(q.Running, s)
		}
	}
	starts := map[string]Start{}
	for _, q := range queues {
		for _, s := range Estimate(*q) {
			starts[s.Run] = s
		}
	}
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Phase != taugridv1.PhaseQueued {
			continue
		}
		s, ok := starts[r.Run]
		if !ok {
			r.Start = "start time unknown: its queue's quota is not readable"
			continue
		}
		r.Start = s.Text()
		if s.Known() {
			r.StartsAt = ptr.To(now.Add(s.In).UTC())
		}
	}
}

// GPUQueue is ClusterQueue cq's GPUs for the estimate: its own quota, and
// how many more it may borrow (-1: no limit).
func GPUQueue(cq *kueue.ClusterQueue) *Queue {
	q := &Queue{}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.Name != GPU {
					continue
				}
				q.Capacity += r.NominalQuota.Value()
				switch {
				case q.Borrowable < 0:
				case r.BorrowingLimit != nil:
					q.Borrowable += r.BorrowingLimit.Value()
				case cq.Spec.CohortName != "":
					q.Borrowable = -1
				}
			}
		}
	}
	return q
}

// GPU is the resource the estimate counts.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// slot is r as the estimate sees it: its GPUs from its Kueue Workload,
// its time limit from its Job or RayJob, and how long it has held quota.
func slot(ctx context.Context, c client.Reader, r *taugridv1.TauRun, now time.Time) Slot {
	s := Slot{Run: r.Name}
	w := r.Status.Workload
	if w == nil {
		return s
	}
	if w.Workload != "" {
		var wl kueue.Workload
		if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: w.Workload}, &wl); err == nil {
			s.GPUs = WorkloadGPUs(&wl)
		}
	}
	if limit, _, ok := TimeLimit(ctx, c, r.Namespace, w.Kind, w.Name); ok {
		s.Limit = limit
	}
	if r.Status.Phase != taugridv1.PhaseQueued {
		for _, t := range r.Status.Phases {
			if t.Phase == taugridv1.PhaseAdmitted {
				s.Elapsed = now.Sub(t.Time.Time)
				s.Progress, s.ProgressAt = ReportedProgress(r, t.Time.Time)
			}
		}
	}
	return s
}

// CurrentProgress is the progress r's current attempt reported; nil when
// it reported none (an earlier attempt's is not its).
func CurrentProgress(r *taugridv1.TauRun) *taugridv1.RunProgress {
	p, n := r.Status.Progress, len(r.Status.Attempts)
	if p == nil || n == 0 || p.Attempt != r.Status.Attempts[n-1].Number {
		return nil
	}
	return p
}

// ReportedProgress is how far r's current attempt said it was (0 to 1; 0:
// it said nothing) and how long after start it said so.
func ReportedProgress(r *taugridv1.TauRun, start time.Time) (float64, time.Duration) {
	p := CurrentProgress(r)
	if p == nil || p.Time.Time.Before(start) {
		return 0, 0
	}
	return float64(p.Percent) / 100, p.Time.Sub(start)
}

// TimeLimit is the activeDeadlineSeconds of namespace ns's Job or RayJob
// name (kind), and when it started (nil: not yet); false when it is not
// there or has no limit. opts go to the Get: a cache's
// client.UnsafeDisableDeepCopy, for one.
func TimeLimit(ctx context.Context, c client.Reader, ns, kind, name string, opts ...client.GetOption) (time.Duration, *metav1.Time, bool) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	var limit *int64
	var start *metav1.Time
	switch kind {
	case "Job":
		var j batchv1.Job
		if c.Get(ctx, key, &j, opts...) != nil {
			return 0, nil, false
		}
		limit, start = j.Spec.ActiveDeadlineSeconds, j.Status.StartTime
	case "RayJob":
		var j rayv1.RayJob
		if c.Get(ctx, key, &j, opts...) != nil {
			return 0, nil, false
		}
		if d := j.Spec.ActiveDeadlineSeconds; d != nil {
			limit = ptr.To(int64(*d))
		}
		start = j.Status.StartTime
	}
	if limit == nil {
		return 0, nil, false
	}
	return time.Duration(*limit) * time.Second, start, true
}

// WorkloadGPUs is what all the pods of wl ask for.
func WorkloadGPUs(wl *kueue.Workload) int64 {
	var n int64
	for _, ps := range wl.Spec.PodSets {
		n += int64(ps.Count) * podGPUs(ps.Template.Spec)
	}
	return n
}

// podGPUs is what one pod of spec asks for.
func podGPUs(spec corev1.PodSpec) int64 {
	var n int64
	for _, ctr := range spec.Containers {
		if q, ok := ctr.Resources.Limits[GPU]; ok {
			n += q.Value()
		} else if q, ok := ctr.Resources.Requests[GPU]; ok {
			n += q.Value()
		}
	}
	return n
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
