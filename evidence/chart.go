package evidence

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Chart geometry, in SVG user units: the plot sits inside margins that hold
// the axis labels.
const (
	chartWidth  = 560
	chartHeight = 180
	chartLeft   = 64
	chartRight  = 12
	chartTop    = 12
	chartBottom = 28
	// maxCharts bounds the charts of one attempt (one per key, by name).
	maxCharts = 12
)

// Chart is one series drawn as an SVG line chart by the page template: no
// script, so the page's CSP (default-src 'none') holds.
type Chart struct {
	Key    string
	Width  int
	Height int
	// Points is the polyline's points attribute, in plot coordinates.
	Points string
	// Dots is set for a series of one point, which a line cannot show.
	Dots  []XY
	Plot  Rect
	YTick []Tick // left axis: min, middle, max
	XTick []Tick // bottom axis: first and last step
	Last  string // the last value, for the caption
	Steps int
	// XUnit names the bottom axis's unit: "step" unless said otherwise.
	XUnit string
}

// XY is a point in SVG coordinates.
type XY struct{ X, Y float64 }

// Rect is the plot area.
type Rect struct{ X, Y, W, H float64 }

// Tick is an axis label at a coordinate.
type Tick struct {
	At    float64
	Label string
}

// ChartsOf draws each series of m with at least one point, ordered by key.
func ChartsOf(m *Metrics) []Chart {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m.Series))
	for k, s := range m.Series {
		if len(s) > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]Chart, 0, min(len(keys), maxCharts))
	for _, k := range keys[:min(len(keys), maxCharts)] {
		out = append(out, lineChart(k, m.Series[k]))
	}
	return out
}

// lineChart scales a series into the plot area.
func lineChart(key string, pts []Point) Chart {
	return lineChartIn(key, pts, nil)
}

// lineChartIn scales a series into the plot area, its values on a fixed
// axis when yRange is given (values outside it are clamped), else on the
// series' own range.
func lineChartIn(key string, pts []Point, yRange *[2]float64) Chart {
	pts = slices.SortedStableFunc(slices.Values(pts), func(a, b Point) int { return cmp.Compare(a.Step, b.Step) })
	plot := Rect{X: chartLeft, Y: chartTop, W: chartWidth - chartLeft - chartRight, H: chartHeight - chartTop - chartBottom}
	x0, x1 := pts[0].Step, pts[len(pts)-1].Step
	y0, y1 := pts[0].Value, pts[0].Value
	for _, p := range pts {
		y0, y1 = min(y0, p.Value), max(y1, p.Value)
	}
	if yRange != nil {
		y0, y1 = yRange[0], yRange[1]
		for i := range pts {
			pts[i].Value = min(max(pts[i].Value, y0), y1)
		}
	}
	sx := scale(x0, x1, plot.X, plot.X+plot.W)
	sy := scale(y0, y1, plot.Y+plot.H, plot.Y) // up is more
	c := Chart{Key: key, Width: chartWidth, Height: chartHeight, Plot: plot, Steps: len(pts),
		Last: label(pts[len(pts)-1].Value), XUnit: "step"}
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", sx(p.Step), sy(p.Value))
	}
	c.Points = b.String()
	if len(pts) == 1 {
		c.Dots = []XY{{sx(pts[0].Step), sy(pts[0].Value)}}
	}
	c.YTick = []Tick{{sy(y1), label(y1)}, {sy((y0 + y1) / 2), label((y0 + y1) / 2)}, {sy(y0), label(y0)}}
	c.XTick = []Tick{{sx(x0), label(x0)}, {sx(x1), label(x1)}}
	if x0 == x1 {
		c.XTick = c.XTick[:1]
	}
	return c
}

// scale maps [a, b] onto [from, to]; a flat range maps to the middle.
func scale(a, b, from, to float64) func(float64) float64 {
	if a == b {
		return func(float64) float64 { return (from + to) / 2 }
	}
	return func(v float64) float64 { return from + (v-a)/(b-a)*(to-from) }
}

// label formats an axis value in at most 4 significant digits.
func label(v float64) string {
	return strconv.FormatFloat(v, 'g', 4, 64)
}
