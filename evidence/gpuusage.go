package evidence

import (
	"slices"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// GPUUsage is how busy the attempt's GPUs were, as the node agents measured
// it and the controller recorded it on the run.
type GPUUsage struct {
	// Summary is the run's one line, e.g. "8 GPUs, 91% busy over the last 10 min".
	Summary string `json:"summary"`
	GPUs    int    `json:"gpus"`
	// UUIDs are the GPUs the attempt's pods were seen holding, by NVML UUID.
	UUIDs []string `json:"uuids,omitempty"`
	// Idle: the GPUs stayed under the platform's idle threshold for its
	// idle time, from IdleSince.
	Idle      bool       `json:"idle,omitempty"`
	IdleSince *time.Time `json:"idle_since,omitempty"`
	// SeriesStart is the minute the points count from; each point covers
	// StepMinutes.
	SeriesStart time.Time    `json:"series_start"`
	StepMinutes int          `json:"step_minutes"`
	Points      []UsagePoint `json:"points,omitempty"`
}

// UsagePoint is the mean utilisation of the attempt's GPUs over one step.
type UsagePoint struct {
	Minute  int `json:"minute"`
	Percent int `json:"percent"`
	// Minutes with a reading that the point folds.
	Minutes int `json:"minutes"`
}

// GPUUsageOf copies a run's record of an attempt's GPU usage; nil stays nil.
func GPUUsageOf(u *taugridv1.GPUUsage) *GPUUsage {
	if u == nil {
		return nil
	}
	out := &GPUUsage{Summary: u.Summary, GPUs: int(u.GPUs), UUIDs: slices.Clone(u.UUIDs), Idle: u.Idle,
		SeriesStart: u.Series.Start.UTC(), StepMinutes: int(u.Series.StepMinutes)}
	if u.IdleSince != nil {
		t := u.IdleSince.UTC()
		out.IdleSince = &t
	}
	for _, p := range u.Series.Points {
		out.Points = append(out.Points, UsagePoint{Minute: int(p.Minute), Percent: int(p.Percent), Minutes: int(p.Minutes)})
	}
	return out
}

// UsageChart draws the utilisation series on a fixed 0 to 100% axis by
// minute of the attempt; nil when there is no point.
func UsageChart(u *GPUUsage) *Chart {
	if u == nil || len(u.Points) == 0 {
		return nil
	}
	pts := make([]Point, len(u.Points))
	for i, p := range u.Points {
		pts[i] = Point{Step: float64(p.Minute), Value: float64(p.Percent)}
	}
	c := lineChartIn("GPU utilisation %", pts, &[2]float64{0, 100})
	c.XUnit = "min"
	return &c
}
