package evidence

import (
	"fmt"
	"image"
	"image/color"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"

	"github.com/google/go-cmp/cmp"

	"github.com/taugrid/taugrid/test/browser"
)

// trainingLog is what a training script prints: a TAU_METRIC record per
// step with loss falling and accuracy rising, a learning rate, text fields,
// and a garbage line.
func trainingLog(steps int) string {
	var b strings.Builder
	for s := 1; s <= steps; s++ {
		fmt.Fprintf(&b, "TAU_METRIC {\"step\": %d, \"loss\": %g, \"accuracy\": %g, \"lr\": 0.001, \"phase\": \"train\"}\n",
			s*10, 2.0/float64(s), 1-1/float64(s+1))
	}
	b.WriteString("TAU_METRIC not json\n")
	return b.String()
}

func TestMetricSeriesAreKeptByStepAndBounded(t *testing.T) {
	cases := map[string]struct {
		log        string
		wantKeys   []string
		wantPoints int
		wantFirst  Point
	}{
		"a short run keeps every point, by its step, the step itself not charted": {
			log: trainingLog(5), wantKeys: []string{"accuracy", "loss", "lr"}, wantPoints: 5, wantFirst: Point{10, 2}},
		"a long run is thinned to the bound, keeping the last point": {
			log: trainingLog(5000), wantKeys: []string{"accuracy", "loss", "lr"}, wantPoints: -1},
		"records without a step are numbered": {
			log: "TAU_METRIC {\"loss\": 3}\nTAU_METRIC {\"loss\": 1}\n", wantKeys: []string{"loss"}, wantPoints: 2, wantFirst: Point{1, 3}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var m Metrics
			m.ScanMetrics([]byte(tc.log))
			var keys []string
			for _, c := range ChartsOf(&m) {
				keys = append(keys, c.Key)
			}
			if diff := cmp.Diff(tc.wantKeys, keys); diff != "" {
				t.Errorf("charts (-want +got):\n%s", diff)
			}
			loss := m.Series["loss"]
			switch {
			case tc.wantPoints > 0 && len(loss) != tc.wantPoints:
				t.Errorf("%d loss points, want %d", len(loss), tc.wantPoints)
			case tc.wantPoints < 0 && (len(loss) > maxSeriesPoints || len(loss) < maxSeriesPoints/2 || loss[len(loss)-1].Step != 50000):
				t.Errorf("%d loss points ending at step %v, want at most %d ending at the last step", len(loss), loss[len(loss)-1].Step, maxSeriesPoints)
			case tc.wantPoints > 0 && loss[0] != tc.wantFirst:
				t.Errorf("first loss point %+v, want %+v", loss[0], tc.wantFirst)
			}
		})
	}
}

func TestAChartScalesItsSeriesIntoThePlot(t *testing.T) {
	c := lineChart("loss", []Point{{Step: 30, Value: 1}, {Step: 10, Value: 3}, {Step: 20, Value: 2}})
	want := "64.0,12.0 306.0,82.0 548.0,152.0" // sorted by step; the highest value at the top
	if c.Points != want {
		t.Errorf("points %q, want %q", c.Points, want)
	}
	got := []string{c.YTick[0].Label, c.YTick[2].Label, c.XTick[0].Label, c.XTick[1].Label, c.Last}
	if diff := cmp.Diff([]string{"3", "1", "10", "30", "1"}, got); diff != "" {
		t.Errorf("ticks and last (-want +got):\n%s", diff)
	}
	flat := lineChart("lr", []Point{{Step: 5, Value: 0.1}})
	if len(flat.Dots) != 1 || len(flat.XTick) != 1 {
		t.Errorf("a single point: %d dots, %d x ticks; want a dot and one tick", len(flat.Dots), len(flat.XTick))
	}
}

// busyThenIdle is an attempt's GPU usage over n minutes: 90% busy, then
// 2% for the last third.
func busyThenIdle(n int) *GPUUsage {
	u := &GPUUsage{Summary: "8 GPUs, 2% busy over the last 10 min", GPUs: 8, SeriesStart: sealTime.Add(-time.Duration(n) * time.Minute), StepMinutes: 1}
	for m := range n {
		pct := 90
		if m >= 2*n/3 {
			pct = 2
		}
		u.Points = append(u.Points, UsagePoint{Minute: m, Percent: pct, Minutes: 1})
	}
	return u
}

func TestTheGPUUsageChartIsDrawnOnAFixedPercentAxisByMinute(t *testing.T) {
	c := UsageChart(busyThenIdle(3))
	if c == nil {
		t.Fatal("no chart for a series of 3 points")
	}
	got := []string{c.YTick[0].Label, c.YTick[2].Label, c.XTick[0].Label, c.XTick[1].Label, c.XUnit, c.Last}
	if diff := cmp.Diff([]string{"100", "0", "0", "2", "min", "2"}, got); diff != "" {
		t.Errorf("ticks, unit and last (-want +got):\n%s", diff)
	}
	if UsageChart(&GPUUsage{Summary: "no reading yet"}) != nil {
		t.Error("a chart for a series with no point")
	}
}

// TestTheMetricChartsDrawInABrowserWithoutScripts loads the evidence page of a
// run that printed 200 steps of metrics in headless Chromium, under the
// page's CSP: the DOM holds one SVG chart per numeric key and no script, and
// the screenshot shows the charts' lines.
func TestTheMetricChartsDrawInABrowserWithoutScripts(t *testing.T) {
	bin := browser.Chromium(t)
	st, _ := NewFileStore(t.TempDir())
	key := Key{Namespace: "team-a", Run: "research-1a2b", Attempt: 1}
	log := trainingLog(200)
	sealInto(t, st, exampleBundleWith(t, key, "training\n", func(r *Record) {
		r.Metrics = &Metrics{}
		r.Metrics.ScanMetrics([]byte(log))
		r.Attempts[len(r.Attempts)-1].GPUUsage = busyThenIdle(90)
	}))
	s := &Server{Store: st, Runs: liveRuns{"team-a/research-1a2b": &Live{Run: liveRun("research-1a2b", taugridv1.PhaseSucceeded), RepositoryURL: "https://github.com/acme/research.git"}}, Now: func() time.Time { return sealTime.Add(41 * time.Minute) },
		Links: testLinks, Tokens: teamTokens}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	url := signed(srv.URL, "team-a", "research-1a2b", pageNow.Add(time.Hour))

	out, _ := browser.Browse(t, bin, "--dump-dom", url)
	dom := string(out)
	for _, want := range []string{`aria-label="accuracy by step"`, `aria-label="loss by step"`, `aria-label="lr by step"`, "step 2000", "200 points",
		`aria-label="GPU utilisation % by min"`, "min 89", "8 GPUs, 2% busy over the last 10 min"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered DOM lacks %q", want)
		}
	}
	if n := strings.Count(dom, "<svg"); n != 4 {
		t.Errorf("%d SVG charts, want 4 (GPU utilisation, accuracy, loss, lr)", n)
	}
	if strings.Contains(dom, "<script") {
		t.Error("the page has a script")
	}

	img := browser.Screenshot(t, bin, url, "evidence-metric-charts.png")
	if n := pixels(img, image.Rect(0, 0, img.Bounds().Dx(), img.Bounds().Dy()), color.RGBA{0x82, 0x50, 0xdf, 0xff}); n < 800 {
		t.Errorf("the charts' purple lines are not visible (%d pixels)", n)
	}
}
