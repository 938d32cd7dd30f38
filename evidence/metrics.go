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
	// Series are each numeric key's values by step, for the page's charts:
	// the record's "step" (else "global_step", "iteration", "epoch"), or its
	// number among the records when it has none. At most maxSeriesPoints a
	// key: past that, every other point is dropped (older points end up
	// sparser than recent ones).
	Series map[string][]Point `json:"series,omitempty"`
}

// Point is one value of a key at one step.
type Point struct {
	Step  float64 `json:"x"`
	Value float64 `json:"y"`
}

// maxSeriesPoints bounds each series a bundle keeps.
const maxSeriesPoints = 512

// stepKeys are the keys that say where in training a record is, in order of preference.
var stepKeys = []string{"step", "global_step", "iteration", "epoch"}

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
		step, stepKey := stepOf(rec, float64(m.Records))
		for k, v := range rec {
			f, ok := v.(float64)
			if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			if m.add(k, f) && k != stepKey {
				m.addPoint(k, Point{Step: step, Value: f})
			}
		}
	}
}

// add folds v into k's summary; false when k is past the bound of keys.
func (m *Metrics) add(k string, v float64) bool {
	if m.Keys == nil {
		m.Keys = map[string]MetricSummary{}
	}
	s, ok := m.Keys[k]
	switch {
	case !ok && len(m.Keys) >= maxMetricKeys:
		m.Skipped++
		return false
	case !ok:
		s = MetricSummary{First: v, Min: v, Max: v}
	}
	s.Count++
	s.Last = v
	s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	m.Keys[k] = s
	return true
}

// addPoint appends to k's series, halving it when it is full.
func (m *Metrics) addPoint(k string, p Point) {
	if m.Series == nil {
		m.Series = map[string][]Point{}
	}
	s := append(m.Series[k], p)
	if len(s) > maxSeriesPoints {
		kept := s[:0]
		for i := range s {
			if i%2 == 1 || i == len(s)-1 {
				kept = append(kept, s[i])
			}
		}
		s = kept
	}
	m.Series[k] = s
}

// stepOf is a record's step and the key it came from ("" for the record's number).
func stepOf(rec map[string]any, number float64) (float64, string) {
	for _, k := range stepKeys {
		if f, ok := rec[k].(float64); ok && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, k
		}
	}
	return number, ""
}
