package board

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/runs"
)

// GPU is the resource the board counts.
const GPU = runs.GPU

// PerPage is how many runs one page of the board lists.
const PerPage = 50

// Filter narrows the board's run list; the zero Filter lists every run.
type Filter struct {
	Phase, Repository, Person string
	Page                      int // from 1
}

// Team is one team's board: everything it shows, read from the cluster.
type Team struct {
	Namespace string
	Now       time.Time
	Filter    Filter
	Runs      []RunRow // this page's, newest first
	Matched   int      // runs the filter matches
	Pages     int
	Phases    []PhaseCount // every run's, unfiltered
	Repos     []string
	People    []string
	Queue     []QueueRow
	Quota     []QuotaBar
	Usage     Showback
	Idle      []IdleRow
}

// PhaseCount is how many of the team's runs are in a phase.
type PhaseCount struct {
	Phase taugridv1.RunPhase
	Count int
}

// RunRow is one run in the list.
type RunRow struct {
	Name, ID, Repository, Commit, CommitURL, Ref, Requester, Message, EvidenceURL string
	Phase                                                                         taugridv1.RunPhase
	Created                                                                       time.Time
	Duration                                                                      time.Duration
	GPUs                                                                          int32
	Utilization                                                                   string // "73%", "" when not read
	Progress                                                                      string // "42% done" as the running attempt reported it
}

// QueueRow is a run that holds or waits for quota, in Kueue's order.
type QueueRow struct {
	Run, ID, Queue, Why string
	Phase               taugridv1.RunPhase
	Position            int32
	GPUs                int64
	Start               string // the estimate, for a waiting run
	Progress            string // "42% done", for a running one that said so
}

// QuotaBar is one flavor's GPUs of a ClusterQueue.
type QuotaBar struct {
	ClusterQueue, Flavor                     string
	Nominal, InUse, Borrowed, BorrowingLimit int64
	Lendable                                 int64 // what the cohort may borrow from it; -1: all of it
	UnlimitedBorrowing                       bool
}

// IdleRow is a run whose allocated GPUs sit under the idle threshold now.
type IdleRow struct {
	Namespace, Run, ID, EvidenceURL string
	GPUs                            int32
	Since                           time.Time
}

// Read reads namespace ns's board through c (the controller's cache).
func Read(ctx context.Context, c client.Reader, ns string, f Filter, now time.Time) (*Team, error) {
	var list taugridv1.TauRunList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	var repos taugridv1.TauRepositoryList
	if err := c.List(ctx, &repos, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing repositories: %w", err)
	}
	web := map[string]string{}
	for _, r := range repos.Items {
		web[r.Name] = evidence.WebURL(r.Spec.URL)
	}
	runs.SortNewestFirst(list.Items)
	t := &Team{Namespace: ns, Now: now, Filter: f}
	t.listRuns(list.Items, web)
	t.Usage = showback(list.Items, now, requester)
	t.Idle = idle(list.Items)
	if err := t.readQueue(ctx, c, ns, list.Items, now); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Team) listRuns(items []taugridv1.TauRun, web map[string]string) {
	counts := map[taugridv1.RunPhase]int{}
	repos, people := map[string]bool{}, map[string]bool{}
	var matched []RunRow
	for i := range items {
		r := &items[i]
		counts[phaseOf(r)]++
		repos[r.Spec.Repository] = true
		people[requester(r)] = true
		if t.Filter.Phase != "" && string(phaseOf(r)) != t.Filter.Phase ||
			t.Filter.Repository != "" && r.Spec.Repository != t.Filter.Repository ||
			t.Filter.Person != "" && requester(r) != t.Filter.Person {
			continue
		}
		matched = append(matched, t.row(r, web[r.Spec.Repository]))
	}
	for _, p := range []taugridv1.RunPhase{taugridv1.PhasePending, taugridv1.PhaseQueued, taugridv1.PhaseAdmitted, taugridv1.PhaseRunning,
		taugridv1.PhaseSucceeded, taugridv1.PhaseFailed, taugridv1.PhaseCancelled} {
		t.Phases = append(t.Phases, PhaseCount{p, counts[p]})
	}
	t.Repos, t.People = sortedKeys(repos), sortedKeys(people)
	t.Matched = len(matched)
	t.Pages = max(1, (len(matched)+PerPage-1)/PerPage)
	t.Filter.Page = min(max(t.Filter.Page, 1), t.Pages)
	from := (t.Filter.Page - 1) * PerPage
	t.Runs = matched[from:min(from+PerPage, len(matched))]
}

func (t *Team) row(r *taugridv1.TauRun, web string) RunRow {
	row := RunRow{Name: r.Name, ID: runs.ID(r), Repository: r.Spec.Repository, Commit: r.Spec.Commit, Ref: r.Spec.Trigger.Ref,
		Requester: requester(r), Message: r.Status.Message, EvidenceURL: r.Status.EvidenceURL, Phase: phaseOf(r),
		Created: r.CreationTimestamp.Time, Duration: duration(r, t.Now)}
	if web != "" && r.Spec.Commit != "" {
		row.CommitURL = web + "/commit/" + r.Spec.Commit
	}
	row.Progress = progressOf(r)
	if a := current(r); a != nil && a.GPUUsage != nil {
		row.GPUs = a.GPUUsage.GPUs
		if n := len(a.GPUUsage.Series.Points); n > 0 {
			row.Utilization = fmt.Sprintf("%d%%", a.GPUUsage.Series.Points[n-1].Percent)
		}
	}
	return row
}

// readQueue lists the runs that hold or wait for quota in Kueue's order,
// with each waiting run's estimated start, and each ClusterQueue's GPUs.
func (t *Team) readQueue(ctx context.Context, c client.Reader, ns string, items []taugridv1.TauRun, now time.Time) error {
	rep, err := runs.ReportQueueOf(ctx, c, ns, items, now) // items: newest first
	if err != nil {
		return fmt.Errorf("reading the queues: %w", err)
	}
	byName := map[string]*taugridv1.TauRun{}
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	seen := map[string]bool{}
	for _, q := range rep.Queues {
		if !seen[q.ClusterQueue] {
			seen[q.ClusterQueue] = true
			t.Quota = append(t.Quota, gpuQuota(ctx, c, q.ClusterQueue)...)
		}
	}
	for _, qr := range rep.Runs {
		r := byName[qr.Run]
		if r == nil {
			continue
		}
		t.Queue = append(t.Queue, QueueRow{Run: r.Name, ID: runs.ID(r), Queue: qr.Queue, Why: qr.Message, Phase: qr.Phase,
			Position: qr.Position, GPUs: qr.GPUs, Start: qr.Start, Progress: progressOf(r)})
	}
	return nil
}

// gpuQuota is a bar per flavor of ClusterQueue name that has GPUs.
func gpuQuota(ctx context.Context, c client.Reader, name string) []QuotaBar {
	var cq kueue.ClusterQueue
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &cq); err != nil {
		return nil
	}
	return gpuBars(&cq)
}

// gpuBars is a bar per flavor of cq that has GPUs.
func gpuBars(cq *kueue.ClusterQueue) []QuotaBar {
	name := cq.Name
	used := map[string]kueue.ResourceUsage{}
	for _, fu := range cq.Status.FlavorsReservation {
		for _, ru := range fu.Resources {
			if ru.Name == GPU {
				used[string(fu.Name)] = ru
			}
		}
	}
	var bars []QuotaBar
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			for _, r := range f.Resources {
				if r.Name != GPU {
					continue
				}
				u := used[string(f.Name)]
				b := QuotaBar{ClusterQueue: name, Flavor: string(f.Name), Nominal: r.NominalQuota.Value(),
					InUse: u.Total.Value(), Borrowed: u.Borrowed.Value(), Lendable: -1}
				switch {
				case r.BorrowingLimit != nil:
					b.BorrowingLimit = r.BorrowingLimit.Value()
				case cq.Spec.CohortName != "":
					b.UnlimitedBorrowing = true
				}
				if r.LendingLimit != nil {
					b.Lendable = r.LendingLimit.Value()
				}
				bars = append(bars, b)
			}
		}
	}
	return bars
}

// Showback is GPU-hours per person per day over the last Days days.
type Showback struct {
	Days   []time.Time // midnight UTC, oldest first
	People []PersonUsage
	Totals []float64 // per day, everyone
	Week   float64
}

// PersonUsage is one person's GPU-hours per day.
type PersonUsage struct {
	Person string
	Hours  []float64
	Week   float64
}

// Days is how many days the showback covers.
const Days = 7

// showback adds up each attempt's GPUs times the time it held them, split
// at midnight UTC, by whom (a person, a team) key says the run is;
// an attempt whose GPUs were never read adds nothing.
func showback(items []taugridv1.TauRun, now time.Time, key func(*taugridv1.TauRun) string) Showback {
	today := now.UTC().Truncate(24 * time.Hour)
	s := Showback{Totals: make([]float64, Days)}
	for d := Days - 1; d >= 0; d-- {
		s.Days = append(s.Days, today.AddDate(0, 0, -d))
	}
	from := s.Days[0]
	byPerson := map[string][]float64{}
	for i := range items {
		r := &items[i]
		for _, a := range r.Status.Attempts {
			if a.StartTime == nil || a.GPUUsage == nil || a.GPUUsage.GPUs == 0 {
				continue
			}
			start, end := a.StartTime.Time, now
			if a.EndTime != nil {
				end = a.EndTime.Time
			}
			if end.Before(from) {
				continue
			}
			hours := byPerson[key(r)]
			if hours == nil {
				hours = make([]float64, Days)
				byPerson[key(r)] = hours
			}
			for d, day := range s.Days {
				lo, hi := later(start, day), earlier(end, day.Add(24*time.Hour))
				if hi.After(lo) {
					h := hi.Sub(lo).Hours() * float64(a.GPUUsage.GPUs)
					hours[d] += h
					s.Totals[d] += h
					s.Week += h
				}
			}
		}
	}
	for _, p := range sortedKeys(byPerson) {
		u := PersonUsage{Person: p, Hours: byPerson[p]}
		for _, h := range u.Hours {
			u.Week += h
		}
		s.People = append(s.People, u)
	}
	slices.SortStableFunc(s.People, func(a, b PersonUsage) int { return cmp.Compare(b.Week, a.Week) })
	return s
}

// idle lists the running runs whose GPUs are idle now.
func idle(items []taugridv1.TauRun) []IdleRow {
	var out []IdleRow
	for i := range items {
		r := &items[i]
		a := current(r)
		if r.Status.Phase != taugridv1.PhaseRunning || a == nil || a.GPUUsage == nil || !a.GPUUsage.Idle {
			continue
		}
		row := IdleRow{Namespace: r.Namespace, Run: r.Name, ID: runs.ID(r), EvidenceURL: r.Status.EvidenceURL, GPUs: a.GPUUsage.GPUs}
		if a.GPUUsage.IdleSince != nil {
			row.Since = a.GPUUsage.IdleSince.Time
		}
		out = append(out, row)
	}
	return out
}

// progressOf is "42% done" as r's current attempt last reported it; ""
// when it said nothing or the run ended.
func progressOf(r *taugridv1.TauRun) string {
	if p := runs.CurrentProgress(r); p != nil && !r.Status.Phase.Final() {
		return fmt.Sprintf("%d%% done", p.Percent)
	}
	return ""
}

func current(r *taugridv1.TauRun) *taugridv1.Attempt {
	if n := len(r.Status.Attempts); n > 0 {
		return &r.Status.Attempts[n-1]
	}
	return nil
}

func phaseOf(r *taugridv1.TauRun) taugridv1.RunPhase {
	return cmp.Or(r.Status.Phase, taugridv1.PhasePending)
}

func requester(r *taugridv1.TauRun) string {
	return cmp.Or(r.Spec.Trigger.Requester, "unknown")
}

// duration is how long r has been in the system: from its first phase
// (or its creation) to its end, or now.
func duration(r *taugridv1.TauRun, now time.Time) time.Duration {
	start, end := r.CreationTimestamp.Time, now
	if n := len(r.Status.Phases); n > 0 {
		start = r.Status.Phases[0].Time.Time
		if r.Status.Phase.Final() {
			end = r.Status.Phases[n-1].Time.Time
		}
	}
	return max(end.Sub(start), 0).Round(time.Second)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
