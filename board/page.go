package board

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/evidence"
)

//go:embed board.html.tmpl board.css
var files embed.FS

// RefreshSeconds is how often the board reloads itself.
const RefreshSeconds = 30

var pages = template.Must(template.New("board").Funcs(template.FuncMap{
	"css":      evidence.Stylesheet,
	"boardCSS": func() template.CSS { b, _ := files.ReadFile("board.css"); return template.CSS(b) },
	"lower":    strings.ToLower,
	"time":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"day":      func(t time.Time) string { return t.Format("Mon 2") },
	"hours":    func(h float64) string { return strconv.FormatFloat(h, 'f', 1, 64) },
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"hasPrefix":  strings.HasPrefix,
	"add":        func(a, b int) int { return a + b },
	"sub":        func(a, b int) int { return a - b },
	"bar":        quotaBar,
	"usageChart": usageChart,
	"pageURL":    pageURL,
}).ParseFS(files, "board.html.tmpl"))

// page is what a template renders.
type page struct {
	Title    string
	Refresh  int
	Error    string
	Session  bool // signed in with a cookie: the page offers to sign out
	Team     *Team
	Platform *Platform
}

// Handler serves the team board. Auth says which team's namespace a
// request may read; the handler serves nothing else.
type Handler struct {
	// Client reads runs, queues and their Kueue objects (the cache).
	Client client.Reader
	Clock  clock.PassiveClock
	Log    logr.Logger
}

// ServeTeam renders namespace ns's board for a request already allowed to
// read it; session says the request came with a sign-in cookie.
func (h *Handler) ServeTeam(w http.ResponseWriter, r *http.Request, ns string, session bool) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		Message(w, http.StatusNotFound, "No team has that name.")
		return
	}
	q := r.URL.Query()
	f := Filter{Phase: q.Get("phase"), Repository: q.Get("repo"), Person: q.Get("person")}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	t, err := Read(r.Context(), h.Client, ns, f, h.Clock.Now())
	if err != nil {
		h.Log.Error(err, "reading the board", "namespace", ns)
		Message(w, http.StatusInternalServerError, "The board cannot read the cluster now; try again in a moment.")
		return
	}
	if err := render(w, http.StatusOK, "team", page{Title: "team " + ns, Refresh: RefreshSeconds, Session: session, Team: t}); err != nil {
		h.Log.Error(err, "rendering the board", "namespace", ns)
	}
}

// Login renders the sign-in page, with why the last try failed.
func Login(w http.ResponseWriter, code int, why string) {
	_ = render(w, code, "login", page{Title: "Sign in", Error: why})
}

// Message renders a page that says only msg.
func Message(w http.ResponseWriter, code int, msg string) {
	_ = render(w, code, "message", page{Title: "TauGrid", Error: msg})
}

// render writes template name, or a 500 when it fails (a defect: the
// error is for the controller's log).
func render(w http.ResponseWriter, code int, name string, p page) error {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, p); err != nil {
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(code)
	_, err := w.Write(b.Bytes())
	return err
}

// pageURL is the board's link to page n under the same filter.
func pageURL(t *Team, n int) string {
	v := url.Values{}
	for k, s := range map[string]string{"phase": t.Filter.Phase, "repo": t.Filter.Repository, "person": t.Filter.Person} {
		if s != "" {
			v.Set(k, s)
		}
	}
	v.Set("page", strconv.Itoa(n))
	return "?" + v.Encode()
}

// bar is one quota bar's geometry: nominal quota as the track, use over
// it, what is borrowed past the nominal quota after it.
type bar struct {
	Width, Nominal, Used, BorrowedX, Borrowed int
	Label                                     string
}

const barWidth = 480

func quotaBar(q QuotaBar) bar {
	most := max(q.Nominal+q.BorrowingLimit, q.InUse, 1)
	scale := func(n int64) int { return int(n * barWidth / most) }
	own := min(q.InUse-q.Borrowed, q.Nominal)
	return bar{Width: barWidth, Nominal: scale(q.Nominal), Used: scale(own), BorrowedX: scale(q.Nominal), Borrowed: scale(q.Borrowed),
		Label: fmt.Sprintf("%s %s: %d of %d GPUs in use, %d borrowed", q.ClusterQueue, q.Flavor, q.InUse, q.Nominal, q.Borrowed)}
}

// chart is the showback chart's geometry: a bar per day.
type chart struct {
	Width, Height int
	Label         string
	Bars          []dayBar
}

type dayBar struct {
	X, Y, W, H, TextX, TextY int
	Day, Title               string
}

func usageChart(s Showback) chart {
	const w, h, plot, gap = 480, 150, 120, 12
	c := chart{Width: w, Height: h}
	most := 0.0
	for _, v := range s.Totals {
		most = max(most, v)
	}
	bw := (w - gap*(len(s.Days)+1)) / max(len(s.Days), 1)
	var parts []string
	for i, d := range s.Days {
		v := s.Totals[i]
		bh := 0
		if most > 0 {
			bh = int(v / most * plot)
		}
		x := gap + i*(bw+gap)
		c.Bars = append(c.Bars, dayBar{X: x, Y: plot - bh + 4, W: bw, H: bh, TextX: x + bw/2, TextY: h - 8, Day: d.Format("Mon"),
			Title: fmt.Sprintf("%s: %.1f GPU-hours", d.Format("Mon 2 Jan"), v)})
		parts = append(parts, fmt.Sprintf("%s %.1f", d.Format("Mon"), v))
	}
	c.Label = "GPU-hours per day: " + strings.Join(parts, ", ")
	return c
}
