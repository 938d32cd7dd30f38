package nodeagent

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/taugrid/taugrid/api/gpus"
)

// UsageStep is the resolution of the utilisation history: one point a minute
// per GPU, so an hour of 8 GPUs is 480 points.
const UsageStep = time.Minute

// The /gpus wire types, named as the agent has always named them.
type (
	// UsagePoint is one GPU over one step (or the part of it one holder had it).
	UsagePoint = gpus.Point
	// GPUUsage is one GPU's latest reading and its recent history.
	GPUUsage = gpus.GPU
	// UsageReport is what the agent serves at /gpus.
	UsageReport = gpus.Report
)

// usageHistory keeps each GPU's last reading and per-step means. It is written
// by the agent's loop and read by HTTP handlers, hence the lock. Its memory is
// fixed per GPU: points are kept in a slice of window/step capacity.
type usageHistory struct {
	window time.Duration
	mu     sync.Mutex
	gpus   map[string]*GPUUsage
}

func newUsageHistory(window time.Duration) *usageHistory {
	return &usageHistory{window: window, gpus: map[string]*GPUUsage{}}
}

// add records one cycle's readings. A GPU whose utilisation could not be read
// gets no point (a gap, not a zero); a GPU not read for a whole window is forgotten.
func (u *usageHistory) add(now time.Time, samples []GPUSample, holders map[string]Holder) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range samples {
		s := &samples[i]
		if s.UUID == "" || s.Utilization.Err != nil {
			continue
		}
		g := u.gpus[s.UUID]
		if g == nil {
			g = &GPUUsage{UUID: s.UUID, History: make([]UsagePoint, 0, u.capacity())}
			u.gpus[s.UUID] = g
		}
		g.Index, g.Name, g.At, g.UtilizationPct, g.Holder = s.Index, s.Name, now, s.Utilization.Value, holders[s.UUID]
		if s.Memory.Err == nil {
			g.MemoryUsedBytes, g.MemoryTotalBytes = s.Memory.Value.Used, s.Memory.Value.Total
		}
		u.addPoint(g, now)
	}
	for uuid, g := range u.gpus {
		if now.Sub(g.At) > u.window {
			delete(u.gpus, uuid)
		}
	}
}

func (u *usageHistory) capacity() int {
	return int(u.window/UsageStep) + 1
}

// addPoint folds g's latest reading into the current step's point, starting a
// new point at a new step or a new holder, and dropping points past the window.
func (u *usageHistory) addPoint(g *GPUUsage, now time.Time) {
	if u.window <= 0 {
		return
	}
	step := now.Truncate(UsageStep)
	n := len(g.History)
	if n == 0 || g.History[n-1].Start.Before(step) || g.History[n-1].Holder != g.Holder {
		for len(g.History) > 0 && (len(g.History) == cap(g.History) || now.Sub(g.History[0].Start) > u.window) {
			copy(g.History, g.History[1:])
			g.History = g.History[:len(g.History)-1]
		}
		g.History = append(g.History, UsagePoint{Start: step, Holder: g.Holder})
		n = len(g.History)
	}
	p := &g.History[n-1]
	p.Samples++
	p.Pct += (float64(g.UtilizationPct) - p.Pct) / float64(p.Samples) // the running mean
	p.MemoryUsedBytes = max(p.MemoryUsedBytes, g.MemoryUsedBytes)
}

// report copies the history for a reader, ordered by GPU index.
func (u *usageHistory) report(node string) UsageReport {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := UsageReport{Node: node, StepSeconds: int(UsageStep / time.Second), GPUs: make([]GPUUsage, 0, len(u.gpus))}
	for _, g := range u.gpus {
		c := *g
		c.History = append([]UsagePoint(nil), g.History...)
		r.GPUs = append(r.GPUs, c)
	}
	slices.SortFunc(r.GPUs, func(a, b GPUUsage) int { return cmp.Compare(a.Index, b.Index) })
	return r
}

// Usage is the utilisation report of this node's GPUs.
func (a *Agent) Usage() UsageReport {
	return a.usage.report(a.cfg.NodeName)
}

// serveUsage serves Usage as JSON. With ?namespace=, only the GPUs held in
// that namespace, and only their points from that namespace, are shown, so a
// reader asking about one tenant sees nothing of another.
func (a *Agent) serveUsage(w http.ResponseWriter, r *http.Request) {
	rep := a.Usage()
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		rep.GPUs = onlyNamespace(rep.GPUs, ns)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}

// onlyNamespace keeps the GPUs and points held in namespace ns.
func onlyNamespace(gpus []GPUUsage, ns string) []GPUUsage {
	out := gpus[:0]
	for _, g := range gpus {
		pts := g.History[:0]
		for _, p := range g.History {
			if p.Holder.Namespace == ns {
				pts = append(pts, p)
			}
		}
		g.History = pts
		if g.Holder.Namespace != ns {
			g.Holder, g.UtilizationPct, g.MemoryUsedBytes = Holder{}, 0, 0
			if len(pts) == 0 {
				continue
			}
		}
		out = append(out, g)
	}
	return out
}
