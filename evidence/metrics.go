package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"strings"
)

// MetricPrefix starts a log line that carries one metrics.jsonl record.
const MetricPrefix = "TAU_METRIC "

// maxMetricKeys bounds the summary whatever a job prints.
const maxMetricKeys = 64

// MetricSummary sums up one numeric key across the records seen.
type MetricSummary struct {
	Count int     `json:"count"`
	First float64 `json:"first"`
	Last  float64 `json:"last"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

// Metrics is what the controller learned from a run's metrics records.
type Metrics struct {
	// File is where the job keeps the full record on its volume.
	File    string `json:"file,omitempty"`
	Records int    `json:"records"`
	// Skipped counts marked lines that were not one JSON object, and keys
	// past the summary's bound.
	Skipped int                      `json:"skipped"`
	Keys    map[string]MetricSummary `json:"keys,omitempty"`
}

// ScanMetrics reads the TAU_METRIC lines of text into m. Garbage lines are
// skipped and counted, never fatal; non-numeric values are ignored.
func (m *Metrics) ScanMetrics(text []byte) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, MetricPrefix)
		if i < 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line[i+len(MetricPrefix):]), &rec); err != nil || rec == nil {
			m.Skipped++
			continue
		}
		m.Records++
		for k, v := range rec {
			f, ok := v.(float64)
			if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			m.add(k, f)
		}
	}
}

func (m *Metrics) add(k string, v float64) {
	if m.Keys == nil {
		m.Keys = map[string]MetricSummary{}
	}
	s, ok := m.Keys[k]
	switch {
	case !ok && len(m.Keys) >= maxMetricKeys:
		m.Skipped++
		return
	case !ok:
		s = MetricSummary{First: v, Min: v, Max: v}
	}
	s.Count++
	s.Last = v
	s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	m.Keys[k] = s
}
