package run

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/taugrid/taugrid/api/gpus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taugrid/taugrid/controllers/shared"
)

// ReasonGPUsIdle is the Warning event of an attempt whose GPUs went idle.
const ReasonGPUsIdle = "GPUsIdle"

const (
	// usageInterval is how often a running attempt's node agents are read:
	// their history is per minute, so more often would learn nothing.
	usageInterval = time.Minute
	// usageSummaryWindow is the span the one-line summary speaks of.
	usageSummaryWindow = 10 * time.Minute
	// usageUnreadLag is how long minutes wait for a node agent that does
	// not answer before the others' readings are folded without it. The
	// agents keep an hour of history by default, so a short outage loses
	// nothing.
	usageUnreadLag = 30 * time.Minute
	maxUnreadNodes = 16
)

// GPUUsageSource reads the node agents' /gpus reports of some nodes,
// narrowed to one namespace's GPUs. It names the nodes whose agent did not
// answer.
type GPUUsageSource interface {
	Reports(ctx context.Context, namespace string, nodes []string) (map[string]*gpus.Report, []string)
}

// usageRead is when this process last asked the node agents for an
// attempt's GPUs, and the record it kept of it (the attempt's gpuUsage).
type usageRead struct {
	attempt int
	at      time.Time
	usage   *taugridv1.GPUUsage
}

// reconcileGPUUsage reads a running attempt's GPU utilisation, at most once
// per usageInterval, and records it on the attempt (status.attempts[].gpuUsage).
// Under the platform's idle rule (limits.yaml) an attempt whose GPUs went
// idle gets a GPUsIdle Warning event; with idle_policy: stop it reports that
// the attempt must end. It returns when to read again.
//
// A reading that adds nothing (no new minute, the same agents silent: only
// its time moves) leaves the record as it is, so it costs no status write:
// a run on a node whose agent is gone was written once a minute for
// nothing. When to read again is then this process's own record of its
// last reading (usageReads). That record also serves a copy of the run
// from before the reading's write reached the cache, or whose write was
// refused: the reading is put back on the copy, not taken again (each
// reading looks up the node's agent in the API server, around the cache:
// hack/scale counted 1.8 lookups a run at 10,000 runs, one a minute due).
func (r *RunReconciler) reconcileGPUUsage(ctx context.Context, run *taugridv1.TauRun, obs Observed) (stop bool, after time.Duration, err error) {
	n := len(run.Status.Attempts)
	if r.GPUUsage == nil || n == 0 {
		return false, 0, nil
	}
	a := &run.Status.Attempts[n-1]
	now := r.Clock.Now()
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	var last time.Time
	if a.GPUUsage != nil {
		last = a.GPUUsage.ReadAt.Time
	}
	if rd, ok := shared.MemoOf(&r.usageReads).Get(key); ok && rd.attempt == n && rd.at.After(last) {
		if a.GPUUsage == nil || rd.usage.ReadAt.After(a.GPUUsage.ReadAt.Time) {
			a.GPUUsage = rd.usage.DeepCopy()
		}
		last = rd.at
	}
	if u := a.GPUUsage; u != nil && now.Sub(last) < usageInterval {
		return u.Idle && r.stopsIdle(ctx, run), usageInterval - now.Sub(last), nil
	}
	held := attemptGPUs(obs.Pods)
	if held.want == 0 {
		return false, 0, nil // no GPU to read
	}
	rule, err := r.idleRule(ctx, run)
	if err != nil {
		return false, 0, err
	}
	start := now
	if a.StartTime != nil {
		start = a.StartTime.Time
	}
	reports, unread := r.GPUUsage.Reports(ctx, run.Namespace, held.nodes)
	minutes, seen := attemptMinutes(reports, run.Namespace, held.pods)
	u := foldGPUUsage(a.GPUUsage, usageReading{minutes: minutes, seen: seen, want: held.want, unread: unread,
		uuids: heldUUIDs(reports, run.Namespace, held.pods)}, start, now, rule)
	if u.Idle && (a.GPUUsage == nil || !a.GPUUsage.Idle) {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, ReasonGPUsIdle, "Observe", "%s", idleEvent(u, rule))
	}
	if !sameReading(a.GPUUsage, u) {
		a.GPUUsage = u
	}
	shared.MemoOf(&r.usageReads).Put(key, usageRead{attempt: n, at: now, usage: a.GPUUsage.DeepCopy()})
	return u.Idle && rule.Action == render.IdleStop, usageInterval, nil
}

// sameReading: a and b differ in when they were read, if at all.
func sameReading(a, b *taugridv1.GPUUsage) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.ReadAt, y.ReadAt = metav1.Time{}, metav1.Time{}
	return equality.Semantic.DeepEqual(x, y)
}

// stopsIdle reports whether the platform's idle policy ends idle attempts.
func (r *RunReconciler) stopsIdle(ctx context.Context, run *taugridv1.TauRun) bool {
	rule, err := r.idleRule(ctx, run)
	return err == nil && rule != nil && rule.Action == render.IdleStop
}

// idleRule is the idle-GPU rule of the platform policy in force (a change
// to it applies to attempts already running); nil when it sets none.
func (r *RunReconciler) idleRule(ctx context.Context, run *taugridv1.TauRun) (*render.IdleRule, error) {
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo); err != nil {
		return nil, fmt.Errorf("repository %s: %w", run.Spec.Repository, err)
	}
	pol, _, err := r.Policies.Policy(ctx, repo.Spec.Platform)
	if err != nil {
		return nil, err
	}
	return pol.Limits.IdleGPUs(), nil
}

// endIdle records the end of an attempt stopped for idle GPUs on its
// status record and returns the run's message.
func endIdle(run *taugridv1.TauRun, now time.Time) (taugridv1.FailureClass, string) {
	a := &run.Status.Attempts[len(run.Status.Attempts)-1]
	a.FailureClass = string(taugridv1.FailureIdleGPUs)
	a.Reason = "its GPUs were idle: " + a.GPUUsage.Summary + "; the platform's idle_policy is stop"
	if a.EndTime == nil {
		t := metav1.NewTime(now)
		a.EndTime = &t
	}
	return taugridv1.FailureIdleGPUs, fmt.Sprintf("failed (%s): %s", taugridv1.FailureIdleGPUs, a.Reason)
}

// heldGPUs are the GPUs an attempt's pods ask for, and where they run.
type heldGPUs struct {
	pods  map[string]bool
	nodes []string
	want  int
}

// attemptGPUs counts the GPUs the attempt's scheduled pods ask for (any
// extended resource named <vendor>/gpu) and the nodes they run on.
func attemptGPUs(pods []corev1.Pod) heldGPUs {
	h := heldGPUs{pods: map[string]bool{}}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		n := 0
		for _, c := range p.Spec.Containers {
			for name, q := range c.Resources.Limits {
				if strings.HasSuffix(string(name), "/gpu") {
					n += int(q.Value())
				}
			}
		}
		if n == 0 {
			continue
		}
		h.pods[p.Name], h.want = true, h.want+n
		if !slices.Contains(h.nodes, p.Spec.NodeName) {
			h.nodes = append(h.nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(h.nodes)
	return h
}

// minuteUse is the attempt's GPUs over one minute.
type minuteUse struct {
	weighted float64 // percent times samples, summed over the GPUs
	samples  int
	gpus     int
}

func (m *minuteUse) pct() float64 { return m.weighted / float64(m.samples) }

// attemptMinutes folds the reports' points held by the attempt's own pods
// (namespace and pod name) into minutes; points of any other holder, in
// the same namespace or not, count for nothing. It also counts the GPUs the
// pods were seen holding.
func attemptMinutes(reports map[string]*gpus.Report, ns string, pods map[string]bool) (map[int64]*minuteUse, int) {
	out := map[int64]*minuteUse{}
	held := 0
	for _, rep := range reports {
		for _, g := range rep.GPUs {
			mine := g.Holder.Namespace == ns && pods[g.Holder.Pod]
			last := time.Time{}
			for _, p := range g.History {
				if p.Holder.Namespace != ns || !pods[p.Holder.Pod] || p.Samples <= 0 || math.IsNaN(p.Pct) {
					continue
				}
				mine = true
				at := p.Start.UTC().Truncate(time.Minute)
				m := out[at.Unix()]
				if m == nil {
					m = &minuteUse{}
					out[at.Unix()] = m
				}
				m.weighted += min(max(p.Pct, 0), 100) * float64(p.Samples)
				m.samples += p.Samples
				if at != last { // a GPU handed between two of the pods within a minute counts once
					m.gpus++
				}
				last = at
			}
			if mine {
				held++
			}
		}
	}
	return out, held
}

// usageReading is what one reading of the agents found.
type usageReading struct {
	minutes map[int64]*minuteUse // by the minute's Unix time
	seen    int                  // GPUs seen held by the attempt's pods
	want    int                  // GPUs the pods ask for
	unread  []string
	uuids   []string // of the GPUs seen held by the attempt's pods
}

// heldUUIDs are the UUIDs of the GPUs the reports show held by the
// attempt's own pods (namespace and pod name), now or in their history.
func heldUUIDs(reports map[string]*gpus.Report, ns string, pods map[string]bool) []string {
	var out []string
	for _, rep := range reports {
		for _, g := range rep.GPUs {
			held := g.Holder.Namespace == ns && pods[g.Holder.Pod]
			for _, p := range g.History {
				held = held || (p.Holder.Namespace == ns && pods[p.Holder.Pod])
			}
			if held && g.UUID != "" {
				out = append(out, g.UUID)
			}
		}
	}
	return out
}

// mergeUUIDs adds UUIDs to those recorded before: sorted, each once, at
// most MaxGPUUUIDs.
func mergeUUIDs(prev, more []string) []string {
	all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(prev), more...))))
	if len(all) == 0 {
		return nil
	}
	return all[:min(len(all), taugridv1.MaxGPUUUIDs)]
}

// foldGPUUsage adds the whole minutes since the last reading to an
// attempt's record: its series, its idle streak under rule (nil: none) and
// its summary. A minute with no reading, or with fewer GPUs read than the
// attempt holds, breaks an idle streak: GPUs are idle only when seen so.
// While a node's agent does not answer, minutes wait for it (up to
// usageUnreadLag), so an outage leaves no false gap.
func foldGPUUsage(prev *taugridv1.GPUUsage, rd usageReading, start, now time.Time, rule *render.IdleRule) *taugridv1.GPUUsage {
	u := &taugridv1.GPUUsage{}
	if prev != nil {
		u = prev.DeepCopy()
	}
	// To the second, as the API server keeps it: the copy that holds this
	// record then equals the reconciler's memory of it (usageReads).
	u.ReadAt, u.GPUs = metav1.NewTime(now.Truncate(time.Second)), int32(rd.seen)
	u.UUIDs = mergeUUIDs(u.UUIDs, rd.uuids)
	u.Unread = rd.unread[:min(len(rd.unread), maxUnreadNodes)]
	if u.Series.StepMinutes == 0 {
		u.Series = taugridv1.GPUUsageSeries{Start: metav1.NewTime(start.UTC().Truncate(time.Minute)), StepMinutes: 1}
	}
	through := u.Series.Start.Time
	if u.Through != nil {
		through = u.Through.Time
	}
	end := now.UTC().Truncate(time.Minute)
	if len(rd.unread) > 0 && end.Sub(through) < usageUnreadLag {
		end = through
	}
	for m := through; m.Before(end); m = m.Add(time.Minute) {
		use := rd.minutes[m.Unix()]
		if use == nil || use.samples == 0 {
			u.IdleSince = nil
			continue
		}
		addUsagePoint(&u.Series, m, use.pct())
		switch {
		case rule == nil || use.gpus < rd.want || use.pct() >= rule.BelowPercent:
			u.IdleSince = nil
		case u.IdleSince == nil:
			u.IdleSince = &metav1.Time{Time: m}
		}
	}
	if end.After(through) {
		u.Through = &metav1.Time{Time: end}
	}
	u.Idle = rule != nil && u.IdleSince != nil && end.Sub(u.IdleSince.Time) >= rule.For
	u.Summary = usageSummary(u, rd, end, start, rule)
	return u
}

// addUsagePoint folds one minute into the series, halving its resolution
// when it is full.
func addUsagePoint(s *taugridv1.GPUUsageSeries, m time.Time, pct float64) {
	minute := int32(m.Sub(s.Start.Time) / time.Minute)
	bucket := minute / s.StepMinutes * s.StepMinutes
	if n := len(s.Points); n > 0 && s.Points[n-1].Minute == bucket {
		p := &s.Points[n-1]
		p.Percent = int32(math.Round((float64(p.Percent)*float64(p.Minutes) + pct) / float64(p.Minutes+1)))
		p.Minutes++
	} else {
		s.Points = append(s.Points, taugridv1.GPUUsagePoint{Minute: bucket, Percent: int32(math.Round(pct)), Minutes: 1})
	}
	for len(s.Points) > taugridv1.MaxGPUUsagePoints {
		s.StepMinutes *= 2
		s.Points = coarser(s.Points, s.StepMinutes)
	}
}

// coarser merges the points that fall in one step of the new width.
func coarser(pts []taugridv1.GPUUsagePoint, step int32) []taugridv1.GPUUsagePoint {
	out := pts[:0]
	for _, p := range pts {
		p.Minute = p.Minute / step * step
		if n := len(out); n > 0 && out[n-1].Minute == p.Minute {
			q := &out[n-1]
			q.Percent = int32(math.Round(float64(q.Percent*q.Minutes+p.Percent*p.Minutes) / float64(q.Minutes+p.Minutes)))
			q.Minutes += p.Minutes
			continue
		}
		out = append(out, p)
	}
	return out
}

// usageSummary is the one line a researcher reads: "8 GPUs, 91% busy over
// the last 10 min", saying so when fewer GPUs were read than the attempt
// holds, which agents did not answer, and since when the GPUs are idle.
func usageSummary(u *taugridv1.GPUUsage, rd usageReading, end, start time.Time, rule *render.IdleRule) string {
	var b strings.Builder
	switch {
	case rd.seen == 0 && len(rd.unread) > 0:
		fmt.Fprintf(&b, "%s, utilisation unknown", gpuCount(rd.want))
	case rd.seen == 0:
		fmt.Fprintf(&b, "%s, none reported by the node agents yet", gpuCount(rd.want))
	default:
		if rd.seen < rd.want {
			fmt.Fprintf(&b, "%d of ", rd.seen)
		}
		b.WriteString(gpuCount(max(rd.seen, rd.want)))
		from := end.Add(-usageSummaryWindow)
		if s := start.UTC().Truncate(time.Minute); s.After(from) {
			from = s
		}
		var sum minuteUse
		for m := from; m.Before(end); m = m.Add(time.Minute) {
			if use := rd.minutes[m.Unix()]; use != nil {
				sum.weighted, sum.samples = sum.weighted+use.weighted, sum.samples+use.samples
			}
		}
		if sum.samples == 0 {
			b.WriteString(", no whole minute measured yet")
		} else {
			fmt.Fprintf(&b, ", %.0f%% busy over the last %d min", sum.pct(), int(end.Sub(from)/time.Minute))
		}
	}
	if len(rd.unread) > 0 {
		fmt.Fprintf(&b, "; no answer from the node agent on %s", strings.Join(u.Unread, ", "))
	}
	if u.Idle {
		fmt.Fprintf(&b, "; idle: under %g%% since %s UTC", rule.BelowPercent, u.IdleSince.UTC().Format("15:04"))
	}
	return b.String()
}

func gpuCount(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// idleEvent is the GPUsIdle event's message.
func idleEvent(u *taugridv1.GPUUsage, rule *render.IdleRule) string {
	then := "a warning: the attempt goes on (idle_policy: warn)"
	if rule.Action == render.IdleStop {
		then = "the attempt is ended (idle_policy: stop)"
	}
	return fmt.Sprintf("%s under %g%% busy since %s UTC, longer than the platform's idle_gpu_time (%s); %s",
		gpuCount(int(u.GPUs)), rule.BelowPercent, u.IdleSince.UTC().Format("15:04"), rule.For, then)
}
