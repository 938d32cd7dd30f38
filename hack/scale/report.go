package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runctrl "github.com/taugrid/taugrid/controllers/run"
)

// counters are the controller's cumulative counts at one moment.
type counters struct {
	at                 time.Time
	use                usage
	api                map[string]float64        // client-go requests by method
	apiByWhat          map[string]float64        // the same by verb and resource (taugrid_api_requests_total)
	refusedByWhat      map[string]float64        // of them, refused with 409, by verb and resource
	conflicts          float64                   // of them, refused for a stale resourceVersion (409)
	throttled, sent    histSum                   // their wait for --kube-api-qps, and the API server's time
	runQueued, runTook histSum                   // the run controller's reconciles: their wait in its work queue, and their time
	phaseWrites        map[string]*dto.Histogram // news of a run → its phase stored, by phase (runctrl.MetricPhaseWrite)
	gitList, gitFetch  float64
	forge              int   // status posts
	forgeAll           int64 // forge requests of any kind
	ended              int
	heapMiB            float64            // the Go heap in use (go_memstats_heap_inuse_bytes)
	queued             map[string]float64 // the controller's work queues' depth by controller
	reconciles         map[string]float64 // its reconciles by controller
}

func (c counters) apiTotal() float64 {
	t := 0.0
	for _, v := range c.api {
		t += v
	}
	return t
}

// sample reads the controller's /proc entries and /metrics and the forge
// stand-in's count.
func (h *harness) sample() (counters, error) {
	c := counters{at: time.Now(), api: map[string]float64{}, apiByWhat: map[string]float64{}, refusedByWhat: map[string]float64{}, forge: len(h.forge.Calls()), forgeAll: h.forgeIn.n.Load()}
	var err error
	if c.use, err = h.ctrl.usage(); err != nil {
		return c, err
	}
	resp, err := http.Get(h.ctrl.metricsURL)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	mfs, err := parseMetrics(resp.Body)
	if err != nil {
		return c, err
	}
	for _, m := range mfs["rest_client_requests_total"].GetMetric() {
		method := ""
		for _, l := range m.GetLabel() {
			switch {
			case l.GetName() == "method":
				method = l.GetValue()
			case l.GetName() == "code" && l.GetValue() == "409":
				c.conflicts += m.GetCounter().GetValue()
			}
		}
		c.api[method] += m.GetCounter().GetValue()
	}
	for _, m := range mfs["taugrid_api_requests_total"].GetMetric() {
		l := labelsOf(m)
		c.apiByWhat[l["verb"]+" "+l["resource"]] += m.GetCounter().GetValue()
		if l["code"] == "409" {
			c.refusedByWhat[l["verb"]+" "+l["resource"]] += m.GetCounter().GetValue()
		}
	}
	c.throttled = histOf(mfs["rest_client_rate_limiter_duration_seconds"])
	c.sent = histOf(mfs["rest_client_request_duration_seconds"])
	c.runQueued = histWith(mfs["workqueue_queue_duration_seconds"], "name", runController)
	c.runTook = histWith(mfs["controller_runtime_reconcile_time_seconds"], "controller", runController)
	c.queued = byLabel(mfs["workqueue_depth"], "name")
	c.phaseWrites = phaseWritesOf(mfs)
	c.reconciles = byLabel(mfs["controller_runtime_reconcile_total"], "controller")
	for _, m := range mfs["go_memstats_heap_inuse_bytes"].GetMetric() {
		c.heapMiB = m.GetGauge().GetValue() / (1 << 20)
	}
	ops := byLabel(mfs["taugrid_git_requests_total"], "operation")
	c.gitList, c.gitFetch = ops["list"], ops["fetch"]
	h.rec.mu.Lock()
	c.ended = len(h.rec.ended)
	h.rec.mu.Unlock()
	return c, nil
}

// labelsOf is m's labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// byLabel sums a gauge's or a counter's series by the value of one label
// (a work queue's depth by name, reconciles by controller).
func byLabel(mf *dto.MetricFamily, label string) map[string]float64 {
	by := map[string]float64{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				by[l.GetValue()] += m.GetGauge().GetValue() + m.GetCounter().GetValue() // one of them is set
			}
		}
	}
	return by
}

// perRunByController is each controller's reconciles since base per run
// ended, the most first: what wakes a run costs the controller's CPU and
// its workers' time, even when the reconcile writes nothing.
func perRunByController(base, cur counters, n float64) string {
	return cmp.Or(perRun(base.reconciles, cur.reconciles, n), "none")
}

// runController is the run reconciler's controller and work queue name.
const runController = "taurun"

// histSum is a histogram's count and sum over its series.
type histSum struct{ n, secs float64 }

// histOf sums every series of mf.
func histOf(mf *dto.MetricFamily) histSum { return histWith(mf, "", "") }

// histWith sums the series of mf whose label name has value; every
// series when name is "".
func histWith(mf *dto.MetricFamily, name, value string) histSum {
	var h histSum
	for _, m := range mf.GetMetric() {
		if name != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == value }) {
			continue
		}
		h.n += float64(m.GetHistogram().GetSampleCount())
		h.secs += m.GetHistogram().GetSampleSum()
	}
	return h
}

// mean is the mean in the window from a to h, "-" when nothing was seen.
func (h histSum) mean(a histSum) string {
	if h.n <= a.n {
		return "-"
	}
	return fmtDur(time.Duration((h.secs - a.secs) / (h.n - a.n) * float64(time.Second)))
}

// phaseWritesOf is runctrl.MetricPhaseWrite's histogram by phase.
func phaseWritesOf(mfs map[string]*dto.MetricFamily) map[string]*dto.Histogram {
	by := map[string]*dto.Histogram{}
	for _, m := range mfs[runctrl.MetricPhaseWrite].GetMetric() {
		by[labelsOf(m)["phase"]] = m.GetHistogram()
	}
	return by
}

// phaseWritesSince is, for each phase written since prev, the p50 and p99
// of runctrl.MetricPhaseWrite's observations in the window.
func phaseWritesSince(prev, cur counters) string {
	var parts []string
	for _, phase := range slices.Sorted(maps.Keys(cur.phaseWrites)) {
		n, p50, p99 := windowQuantiles(prev.phaseWrites[phase], cur.phaseWrites[phase])
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s (%d)", phase, fmtPct([2]time.Duration{p50, p99}), n))
		}
	}
	return cmp.Or(strings.Join(parts, ", "), "none")
}

// windowQuantiles is the count, p50 and p99 of the observations a
// cumulative histogram gained from prev (nil: none) to cur, each
// interpolated within its bucket as Prometheus' histogram_quantile does;
// one past the last bound is reported as that bound.
func windowQuantiles(prev, cur *dto.Histogram) (uint64, time.Duration, time.Duration) {
	type bucket struct {
		upper float64
		n     uint64
	}
	var bs []bucket
	for i, b := range cur.GetBucket() {
		n := b.GetCumulativeCount()
		if pb := prev.GetBucket(); i < len(pb) {
			n -= pb[i].GetCumulativeCount()
		}
		bs = append(bs, bucket{b.GetUpperBound(), n})
	}
	total := cur.GetSampleCount() - prev.GetSampleCount()
	q := func(q float64) time.Duration {
		rank, lower, below := q*float64(total), 0.0, uint64(0)
		for _, b := range bs {
			if float64(b.n) >= rank {
				if math.IsInf(b.upper, 1) {
					return time.Duration(lower * float64(time.Second))
				}
				in := float64(b.n - below)
				if in == 0 {
					return time.Duration(b.upper * float64(time.Second))
				}
				return time.Duration((lower + (b.upper-lower)*(rank-float64(below))/in) * float64(time.Second))
			}
			lower, below = b.upper, b.n
		}
		return time.Duration(lower * float64(time.Second))
	}
	if total == 0 {
		return 0, 0, 0
	}
	return total, q(0.5), q(0.99)
}

// parseMetrics reads Prometheus' text format: the controller's /metrics
// and the API server's.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// lags are the latency percentiles of the runs that ended in a window.
type lags struct {
	n                                                          int
	toRun, toJob, behindAdmit, behindPod, behindEnd, behindJob [2]time.Duration // p50, p99
	kueueStart, kueueFinish                                    [2]time.Duration // the Job started behind its Workload's admission; the Workload Finished behind the Job's end
}

func (h *harness) lagsOf(names []string) lags {
	var toRun, toJob, admit, pod, end, job, start, finish []time.Duration
	h.rec.mu.Lock()
	for _, n := range names {
		t := h.rec.runs[n]
		add := func(ds *[]time.Duration, later, earlier time.Time) {
			if !later.IsZero() && !earlier.IsZero() {
				*ds = append(*ds, max(0, later.Sub(earlier)))
			}
		}
		add(&toRun, t.created, t.requested)
		add(&toJob, t.job, t.requested)
		add(&admit, t.admittedRun, t.admittedWl)
		add(&pod, t.runRunning, t.podRunning)
		add(&end, t.runDone, t.podDone)
		add(&job, t.runDone, t.jobDone)
		add(&start, t.jobStarted, t.admittedWl)
		add(&finish, t.wlFinished, t.jobDone)
	}
	h.rec.mu.Unlock()
	return lags{n: len(names), toRun: pcts(toRun), toJob: pcts(toJob), behindAdmit: pcts(admit), behindPod: pcts(pod), behindEnd: pcts(end), behindJob: pcts(job),
		kueueStart: pcts(start), kueueFinish: pcts(finish)}
}

func pcts(ds []time.Duration) [2]time.Duration {
	if len(ds) == 0 {
		return [2]time.Duration{-1, -1}
	}
	slices.Sort(ds)
	at := func(p int) time.Duration { return ds[min(len(ds)-1, (len(ds)*p+99)/100-1)] }
	return [2]time.Duration{at(50), at(99)}
}

func fmtPct(p [2]time.Duration) string {
	if p[0] < 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s", fmtDur(p[0]), fmtDur(p[1]))
}

func fmtDur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// checkpoint prints one row: the lags of the runs that ended since the
// previous checkpoint, and the costs since the first request (base) per
// run ended.
func (h *harness) checkpoint(w io.Writer, base, prev, cur counters) {
	h.rec.mu.Lock()
	names := slices.Clone(h.rec.ended[prev.ended:cur.ended])
	existing := len(h.rec.runs)
	h.rec.mu.Unlock()
	l := h.lagsOf(names)
	n := float64(max(1, cur.ended-base.ended))
	mins := cur.at.Sub(prev.at).Minutes()
	var verbs []string
	for _, m := range []string{"GET", "LIST", "POST", "PUT", "PATCH", "DELETE"} {
		if d := cur.api[m] - base.api[m]; d > 0 {
			verbs = append(verbs, fmt.Sprintf("%s %.1f", m, d/n))
		}
	}
	fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s | %.0f (%.0f peak; heap %.0f) | %.1f s (%.0f ms/run) | %.1f (%s) | %.2f (%.2f) | %.0f list, %.0f fetch |\n",
		cur.ended, existing, fmtPct(l.toRun), fmtPct(l.toJob), fmtPct(l.behindAdmit), fmtPct(l.behindPod), fmtPct(l.behindEnd), fmtPct(l.behindJob),
		cur.use.rssMiB, cur.use.peakMiB, cur.heapMiB, cur.use.cpu.Seconds(), float64((cur.use.cpu-base.use.cpu).Milliseconds())/n,
		(cur.apiTotal()-base.apiTotal())/n, strings.Join(verbs, ", "), float64(cur.forge-base.forge)/n, float64(cur.forgeAll-base.forgeAll)/n,
		(cur.gitList-prev.gitList)/mins, (cur.gitFetch-prev.gitFetch)/mins)
	h.logf("TauRun writes per run, the %d ended since the previous row: %s; controller requests refused for a stale copy (409) since the first request: %.2f per run ended (%s)",
		len(names), h.rec.writesOf(names), (cur.conflicts-base.conflicts)/n, refusedByWhat(base, cur, n))
	h.logf("the most written of them: %s", h.rec.mostWritten(names))
	h.logf("controller requests per run ended since the first request, by what (watches left out): %s", perRunByWhat(base, cur, n))
	h.logf("reconciles per run ended since the first request, by controller: %s", perRunByController(base, cur, n))
	h.logf("Kueue, the %d ended since the previous row: each Job started %s (p50 / p99) after its Workload's admission; each Workload Finished %s after its Job's end",
		len(names), fmtPct(l.kueueStart), fmtPct(l.kueueFinish))
	for _, lag := range []struct {
		what           string
		later, earlier func(*runTimes) time.Time
	}{
		{"Kueue's admission", func(t *runTimes) time.Time { return t.admittedRun }, func(t *runTimes) time.Time { return t.admittedWl }},
		{"a pod Running", func(t *runTimes) time.Time { return t.runRunning }, func(t *runTimes) time.Time { return t.podRunning }},
		{"the Job's end", func(t *runTimes) time.Time { return t.runDone }, func(t *runTimes) time.Time { return t.jobDone }},
	} {
		for _, s := range h.rec.slowest(names, 3, lag.later, lag.earlier) {
			h.logf("furthest behind %s: %s", lag.what, s)
		}
	}
	written, seen := h.probe.take()
	h.logf("the API server's floor since the previous row: a probe's write returned in %s (p50 / p99) and a watch saw it %s after it was sent; "+
		"the run controller's reconciles waited %s (mean) in its work queue and took %s (mean)",
		fmtPct(written), fmtPct(seen), cur.runQueued.mean(prev.runQueued), cur.runTook.mean(prev.runTook))
	h.logf("the run controller's own part of a phase's lag since the previous row (the cluster's news of a run reaching its informers → the run's new phase stored; p50 / p99, how many): %s",
		phaseWritesSince(prev, cur))
	secs := cur.at.Sub(prev.at).Seconds()
	h.logf("controller requests since the previous row: %.1f a second; each waited %s (mean) for --kube-api-qps, then %s (mean) on the API server",
		(cur.apiTotal()-prev.apiTotal())/secs, cur.throttled.mean(prev.throttled), cur.sent.mean(prev.sent))
}

// tableHead: lags are p50 / p99 of the runs ended since the previous row;
// CPU, API requests and forge calls are since the first request, per run
// ended; git operations are the previous row's window's.
const tableHead = "| runs ended | TauRuns | request → TauRun p50 / p99 | request → Job | TauRun behind Kueue admission | behind pod Running | behind pod ended | behind Job ended | RSS MiB (peak; Go heap in use) | controller CPU (per run) | API requests per run | forge status posts (all forge requests) per run | git ops per minute |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"

// perRunByWhat is the controller's requests from base to cur by verb and
// resource, per run ended (n), the largest first: "patch
// tauruns.taugrid.dev/status 5.3, create jobs.batch 1.0, ...". An
// informer's watches are the process's, not the runs'.
func perRunByWhat(base, cur counters, n float64) string {
	return cmp.Or(perRun(base.apiByWhat, cur.apiByWhat, n), "none counted (a controller without taugrid_api_requests_total)")
}

// refusedByWhat is perRunByWhat of the requests refused with 409.
func refusedByWhat(base, cur counters, n float64) string {
	return cmp.Or(perRun(base.refusedByWhat, cur.refusedByWhat, n), "none")
}

// perRun is what each of cur's counts grew by since base, per run ended
// of n, the largest first, watches left out; "" when none grew.
func perRun(base, cur map[string]float64, n float64) string {
	per := map[string]float64{}
	for what, v := range cur {
		if d := v - base[what]; d > 0 && !strings.HasPrefix(what, "watch ") {
			per[what] = d / n
		}
	}
	var parts []string
	for _, it := range largestFirst(per) {
		parts = append(parts, fmt.Sprintf("%s %.2f", it.key, it.v))
	}
	return strings.Join(parts, ", ")
}

// keyed is one entry of a map of figures.
type keyed struct {
	key string
	v   float64
}

// largestFirst is m's entries, the largest first, equal ones by key.
func largestFirst(m map[string]float64) []keyed {
	items := make([]keyed, 0, len(m))
	for k, v := range m {
		items = append(items, keyed{k, v})
	}
	slices.SortFunc(items, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(b.v, a.v), strings.Compare(a.key, b.key))
	})
	return items
}
