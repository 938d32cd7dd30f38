package evidence

import (
	"image"
	"image/color"
	"strings"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/test/browser"
)

func TestThePageRendersInABrowserWithItsStatusAndTimelineVisible(t *testing.T) {
	bin := browser.Chromium(t)
	live := &Live{Run: liveRun("research-1a2b", taugridv1.PhaseSucceeded), RepositoryURL: "https://github.com/acme/research.git"}
	srv, _ := pageServer(t, liveRuns{"team-a/research-1a2b": live})
	// The link the commit carries, as a researcher clicks it.
	url := signed(srv.URL, "team-a", "research-1a2b", pageNow.Add(time.Hour))

	out, _ := browser.Browse(t, bin, "--dump-dom", url)
	dom := string(out)
	for _, want := range []string{`id="status"`, ">Succeeded<", `id="timeline"`, "Queued · 12m 0s", "epoch 2 loss 0.12"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered DOM lacks %q", want)
		}
	}

	img := browser.Screenshot(t, bin, url, "evidence-page.png")
	// The status badge (green) sits in the header; the timeline bar shows
	// the queue wait (amber) and the run (blue) below it.
	header := image.Rect(0, 0, img.Bounds().Dx(), 120)
	if n := pixels(img, header, color.RGBA{0x1a, 0x7f, 0x37, 0xff}); n < 200 {
		t.Errorf("the green status badge is not visible in the header (%d pixels)", n)
	}
	for name, c := range map[string]color.RGBA{"queued (amber)": {0x9a, 0x67, 0x00, 0xff}, "admitted (blue)": {0x09, 0x69, 0xda, 0xff}} {
		if n := pixels(img, img.Bounds(), c); n < 500 {
			t.Errorf("the timeline's %s segment is not visible (%d pixels)", name, n)
		}
	}
}

// pixels counts the pixels of r close to c.
func pixels(img image.Image, r image.Rectangle, c color.RGBA) int {
	n := 0
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if near(cr>>8, c.R) && near(cg>>8, c.G) && near(cb>>8, c.B) {
				n++
			}
		}
	}
	return n
}

func near(a uint32, b uint8) bool { return int(a)-int(b) < 8 && int(b)-int(a) < 8 }
