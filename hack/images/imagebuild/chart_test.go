package imagebuild

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	chartloader "helm.sh/helm/v3/pkg/chart/loader"
)

// The packaged chart names every pushed image by repository and digest in
// its default values, keeps values.yaml's comments, carries the version it
// is published as, and is the same bytes when packaged twice.
func TestAPackagedChartNamesTheImagesByDigestAndIsReproducible(t *testing.T) {
	var images []Pushed
	for i, n := range []string{"tau-controller", "tau-nodeagent", "tau"} {
		images = append(images, Pushed{Name: n, Repo: "registry.example/taugrid/" + n,
			Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(string(rune('a'+i)), 64)}})
	}
	src := Source{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a, err := PackageChart("../../../charts/taugrid", "1.2.3", "v1.2.3", images, src)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a packaging that took the clock's time would differ now
	b, err := PackageChart("../../../charts/taugrid", "1.2.3", "v1.2.3", images, src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two packagings of one chart differ")
	}
	c, err := chartloader.LoadArchive(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Version != "1.2.3" || c.Metadata.AppVersion != "v1.2.3" {
		t.Errorf("the chart is version %s, appVersion %s; want 1.2.3, v1.2.3", c.Metadata.Version, c.Metadata.AppVersion)
	}
	for _, img := range images {
		vals := c.Values
		for _, k := range ChartImages[img.Name] {
			vals, _ = vals[k].(map[string]any)
		}
		if vals["repository"] != img.Repo || vals["digest"] != img.Digest.String() {
			t.Errorf("%s: the chart's values say %v@%v, want %s", img.Name, vals["repository"], vals["digest"], img.Ref())
		}
	}
	var raw string
	for _, f := range c.Raw {
		if f.Name == "values.yaml" {
			raw = string(f.Data)
		}
	}
	if !strings.Contains(raw, "# digest (sha256:...) wins over tag.") {
		t.Errorf("values.yaml lost its comments:\n%.400s", raw)
	}
}
