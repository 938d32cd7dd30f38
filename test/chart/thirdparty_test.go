package chart

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// thirdPartyMetric is a metric some other component exports, and where.
type thirdPartyMetric struct {
	name   string
	module string // Go module path; "" for a source that is not one
	dir    string // directory of the module defining it
	prefix string // what the source's name lacks ("" if nothing)
}

// thirdPartyMetrics reads testdata/thirdparty-metrics.txt.
func thirdPartyMetrics(t *testing.T) []thirdPartyMetric {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "thirdparty-metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []thirdPartyMetric
	var cur thirdPartyMetric
	for sc := bufio.NewScanner(f); sc.Scan(); {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 0 || strings.HasPrefix(fields[0], "#"):
		case fields[0] == "module" && len(fields) == 4:
			cur = thirdPartyMetric{module: fields[1], dir: fields[2], prefix: strings.TrimPrefix(fields[3], "-")}
		case fields[0] == "source":
			cur = thirdPartyMetric{}
		case len(fields) == 1:
			m := cur
			m.name = fields[0]
			out = append(out, m)
		default:
			t.Fatalf("thirdparty-metrics.txt: cannot read %q", sc.Text())
		}
	}
	return out
}

// TestThirdPartyMetricNamesAreThoseOfThePinnedSources: each Kueue, KubeRay and
// controller-runtime name the dashboards may read is defined, as a quoted
// string, in that module's source at the version go.mod pins.
func TestThirdPartyMetricNamesAreThoseOfThePinnedSources(t *testing.T) {
	dirs := map[string]string{}
	checked := 0
	for _, m := range thirdPartyMetrics(t) {
		if m.module == "" {
			continue
		}
		if _, ok := dirs[m.module]; !ok {
			dirs[m.module] = moduleSource(t, m.module, m.dir)
		}
		want := `"` + strings.TrimPrefix(m.name, m.prefix) + `"`
		if !strings.Contains(dirs[m.module], want) {
			t.Errorf("%s: %s is not in %s/%s at the pinned version", m.name, want, m.module, m.dir)
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("checked %d names, want the list's", checked)
	}
}

// moduleSource is the text of the non-test Go files of dir in module mod, at
// the version go.mod pins (from the module cache).
func moduleSource(t *testing.T, mod, dir string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	root := strings.TrimSpace(string(out))
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s/%s: no Go files (%v)", mod, dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	return b.String()
}
