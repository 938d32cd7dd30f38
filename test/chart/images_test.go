package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTheChartRunsTheImagesMakeImagesBuilds: the repositories the chart
// pulls are those `make images` tags, each built by cmd/<name>/Dockerfile
// onto a distroless nonroot base.
func TestTheChartRunsTheImagesMakeImagesBuilds(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	registry := regexp.MustCompile(`(?m)^IMAGE_REGISTRY\s*\?=\s*(\S+)`).FindSubmatch(mk)
	images := regexp.MustCompile(`(?m)^IMAGES\s*:=\s*(.+)$`).FindSubmatch(mk)
	if registry == nil || images == nil {
		t.Fatal("the Makefile sets no IMAGE_REGISTRY or IMAGES")
	}
	var built []string
	for _, name := range strings.Fields(string(images[1])) {
		built = append(built, string(registry[1])+"/"+name)
		df, err := os.ReadFile(filepath.Join("..", "..", "cmd", name, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllSubmatch(df, -1)
		if last := string(froms[len(froms)-1][1]); !strings.HasPrefix(last, "gcr.io/distroless/") || !strings.HasSuffix(last, ":nonroot") {
			t.Errorf("cmd/%s/Dockerfile runs on %s, want a distroless nonroot base", name, last)
		}
	}
	values := mustYAML(string(must(os.ReadFile(filepath.Join(Dir(), "values.yaml")))))
	for _, path := range [][]string{{"controller", "image"}, {"nodeAgent", "image"}, {"fetchImage"}} {
		m := values
		for _, k := range path {
			m = m[k].(map[string]any)
		}
		if repo := m["repository"].(string); !slices.Contains(built, repo) {
			t.Errorf("%s.repository %s is not one of the images make images builds: %v", strings.Join(path, "."), repo, built)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
