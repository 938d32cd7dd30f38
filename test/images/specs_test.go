package images

import (
	"slices"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
	"github.com/taugrid/taugrid/test/chart"
)

// TestTheChartPullsTheImagesHackImagesBuilds: every image the rendered
// chart runs is one hack/images builds, under the registry make images
// names them with.
func TestTheChartPullsTheImagesHackImagesBuilds(t *testing.T) {
	r, err := chart.Render(chart.Namespace, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var built []string
	for _, s := range imagebuild.Specs {
		built = append(built, "ghcr.io/taugrid/"+s.Name+":v0.1.0")
	}
	c, _ := deployment(t, r)
	pulled := []string{c.Image}
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--fetch-image="); ok {
			pulled = append(pulled, v)
		}
	}
	if len(pulled) != 2 {
		t.Fatalf("the Deployment names no --fetch-image: %v", c.Args)
	}
	for _, img := range pulled {
		if !slices.Contains(built, img) {
			t.Errorf("the chart pulls %s, which hack/images does not build (%v)", img, built)
		}
	}
}
