package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taugrid/taugrid/controllers/runmetrics"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/nodeagent"
	"github.com/taugrid/taugrid/server"
)

// describer is a prometheus.Registerer that keeps the names of what is
// registered: vectors with no series yet are named too.
type describer map[string]bool

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d describer) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics are the names the controller and the node agent register,
// through the same constructors their mains call, and those of Kueue, KubeRay
// and Ray listed in testdata/thirdparty-metrics.txt.
func exportedMetrics(t *testing.T) describer {
	t.Helper()
	d := describer{}
	d.MustRegister(&runmetrics.RunCollector{})
	if _, err := server.NewWebhookMetrics(d); err != nil {
		t.Fatal(err)
	}
	if _, err := forge.NewMetrics(d); err != nil {
		t.Fatal(err)
	}
	if _, err := gitsource.NewClient(gitsource.Options{CacheDir: t.TempDir(), Registerer: d}); err != nil {
		t.Fatal(err)
	}
	nodeagent.NewMetrics(d)
	for _, m := range thirdPartyMetrics(t) {
		d[m.name] = true
	}
	return d
}

// fromPrometheus are series Prometheus itself makes.
var fromPrometheus = map[string]bool{"up": true}

var (
	quoted     = regexp.MustCompile(`"(\\.|[^"\\])*"`)
	matchers   = regexp.MustCompile(`\{[^}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true}
)

// metricNames extracts the metric names a PromQL expression reads: every
// identifier that is no function, keyword, label or grouping.
func metricNames(expr string) []string {
	for _, re := range []*regexp.Regexp{quoted, matchers, ranges, grouping} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, m := range identifier.FindAllString(expr, -1) {
		if strings.HasSuffix(m, "(") || keywords[m] {
			continue
		}
		names = append(names, m)
	}
	return names
}

func TestMetricNamesAreExtractedFromPromQL(t *testing.T) {
	got := metricNames(`histogram_quantile(0.9, sum by (le, operation) (rate(taugrid_git_request_duration_seconds_bucket{a="b{c}"}[5m]))) / on (x) up or vector(0)`)
	if want := []string{"taugrid_git_request_duration_seconds_bucket", "up"}; !slices.Equal(want, got) {
		t.Errorf("metricNames = %v, want %v", got, want)
	}
}

// known reports whether name is exported, directly or as a histogram's
// series.
func (d describer) known(name string) bool {
	if d[name] || fromPrometheus[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && d[base] {
			return true
		}
	}
	return false
}

// TestDashboardsAndAlertsReadOnlyExportedMetrics: every dashboard is valid
// JSON, and every metric a panel or an alert reads is one the code exports.
func TestDashboardsAndAlertsReadOnlyExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	exprs := map[string][]string{} // where -> expressions
	files, err := filepath.Glob(filepath.Join(Dir(), "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID, Title string
			Panels     []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
			t.Errorf("%s: no uid, title or panels", f)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				exprs[filepath.Base(f)+": "+p.Title] = append(exprs[filepath.Base(f)+": "+p.Title], tg.Expr)
			}
		}
	}
	for _, g := range ruleGroups(t, t.TempDir()) {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = append(exprs["alert "+r.Alert], r.Expr)
		}
	}
	read := 0
	for where, es := range exprs {
		for _, e := range es {
			names := metricNames(e)
			if len(names) == 0 {
				t.Errorf("%s: %q reads no metric", where, e)
			}
			for _, n := range names {
				read++
				if !exported.known(n) {
					t.Errorf("%s: %q reads %s, which nothing exports", where, e, n)
				}
			}
		}
	}
	t.Logf("%d metric reads in %d panels and alerts, against %d exported metrics", read, len(exprs), len(exported))
}
