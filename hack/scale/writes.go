package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// A TauRun's writes, counted by what each one changed: the API server's
// cost per run is mostly writes, and a count by part says which of them a
// run could do without. Every TauRun event the harness sees is one write
// (the watch sends each resourceVersion), so the counts are the API
// server's, not the controller's attempts (a write refused for a stale
// resourceVersion is counted by the controller's 409s instead).

// statusParts are the parts of a TauRun a write may change.
var statusParts = []struct {
	name string
	of   func(*taugridv1.TauRun) any
}{
	{"phase", func(r *taugridv1.TauRun) any { return r.Status.Phase }},
	{"message", func(r *taugridv1.TauRun) any { return r.Status.Message }},
	{"conditions", func(r *taugridv1.TauRun) any { return r.Status.Conditions }},
	{"workload", func(r *taugridv1.TauRun) any { return r.Status.Workload }},
	{"attempts", func(r *taugridv1.TauRun) any {
		a := slices.Clone(r.Status.Attempts)
		for i := range a {
			a[i].GPUUsage = nil
		}
		return a
	}},
	{"gpuUsage", func(r *taugridv1.TauRun) any {
		var u []*taugridv1.GPUUsage
		for _, a := range r.Status.Attempts {
			if a.GPUUsage != nil {
				u = append(u, a.GPUUsage)
			}
		}
		return u
	}},
	{"forge", func(r *taugridv1.TauRun) any { return r.Status.Forge }},
	{"evidence", func(r *taugridv1.TauRun) any { return r.Status.EvidenceURL }},
	{"metadata", func(r *taugridv1.TauRun) any {
		return []any{r.Labels, r.Annotations, r.Finalizers, r.Spec}
	}},
}

// writeLog is one run's last fingerprints and its writes by phase and the
// parts each changed.
type writeLog struct {
	rv      string
	prints  []uint64
	writes  int
	byPhase map[string]int // phase -> writes that left the run in it
	by      map[string]int // "phase part" -> those of them that changed the part
	trail   []string       // each write: the phase it left, the parts it changed and the message (the first maxTrail)
}

// maxTrail is how many of a run's writes its trail keeps.
const maxTrail = 16

func fingerprint(v any) uint64 {
	b, _ := json.Marshal(v)
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// note counts one event of the run: a new resourceVersion is a write, and
// each part whose fingerprint moved is counted under the phase the write
// left the run in. The first event (the create, or the run as the watch
// first saw it) only sets the fingerprints.
func (w *writeLog) note(tr *taugridv1.TauRun) {
	if tr.ResourceVersion == w.rv {
		return
	}
	prints := make([]uint64, len(statusParts))
	for i, p := range statusParts {
		prints[i] = fingerprint(p.of(tr))
	}
	if w.prints != nil {
		w.writes++
		if w.by == nil {
			w.byPhase, w.by = map[string]int{}, map[string]int{}
		}
		phase := cmp.Or(string(tr.Status.Phase), "(none)")
		w.byPhase[phase]++
		var changed []string
		for i, p := range statusParts {
			if prints[i] != w.prints[i] {
				w.by[phase+" "+p.name]++
				changed = append(changed, p.name)
			}
		}
		if len(w.trail) < maxTrail {
			w.trail = append(w.trail, fmt.Sprintf("%s [%s] %q", phase, strings.Join(changed, " "), tr.Status.Message))
		}
	}
	w.rv, w.prints = tr.ResourceVersion, prints
}

// writesOf sums the writes of the named runs: the writes per run and, per
// phase the run was left in, the writes and the parts they changed per run,
// largest first, for instance "7.1: Admitted 2.0 (message 2.0, conditions
// 1.0); Running 1.0 (...); ...". A write may change several parts.
func (r *recorder) writesOf(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	total := 0
	phases := map[string]int{}           // writes that left the run in the phase
	parts := map[string]map[string]int{} // phase -> part -> writes
	r.mu.Lock()
	for _, n := range names {
		w := &r.runs[n].writes
		total += w.writes
		for phase, c := range w.byPhase {
			phases[phase] += c
		}
		for k, c := range w.by {
			phase, part, _ := strings.Cut(k, " ")
			if parts[phase] == nil {
				parts[phase] = map[string]int{}
			}
			parts[phase][part] += c
		}
	}
	r.mu.Unlock()
	n := float64(len(names))
	order := slices.SortedFunc(maps.Keys(phases), func(a, b string) int { return cmp.Or(cmp.Compare(phases[b], phases[a]), strings.Compare(a, b)) })
	var out []string
	for _, phase := range order {
		ps := parts[phase]
		names := slices.SortedFunc(maps.Keys(ps), func(a, b string) int { return cmp.Or(cmp.Compare(ps[b], ps[a]), strings.Compare(a, b)) })
		var each []string
		for _, p := range names {
			each = append(each, fmt.Sprintf("%s %.1f", p, float64(ps[p])/n))
		}
		out = append(out, fmt.Sprintf("%s %.1f (%s)", phase, float64(phases[phase])/n, strings.Join(each, ", ")))
	}
	return fmt.Sprintf("%.1f: %s", float64(total)/n, strings.Join(out, "; "))
}

// mostWritten is the trail of the most written of the named runs: what a
// run's writes said, in order, for instance "r (9 writes): Queued
// [phase message] "waiting for Kueue to see the workload"; ...".
func (r *recorder) mostWritten(names []string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	best := ""
	for _, n := range names {
		if best == "" || r.runs[n].writes.writes > r.runs[best].writes.writes {
			best = n
		}
	}
	if best == "" {
		return "-"
	}
	w := &r.runs[best].writes
	return fmt.Sprintf("%s (%d writes): %s", best, w.writes, strings.Join(w.trail, "; "))
}
