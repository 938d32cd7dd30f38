package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"golang.org/x/term"
)

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// follow shows a run until it ends: on a terminal a live view that redraws
// the phases with a spinner and elapsed times, elsewhere one plain line per
// change. A run that did not succeed is an error, so the exit code tells
// scripts the outcome; Ctrl-C stops following, not the run.
func follow(cmd *cobra.Command, src runSource, id string, every time.Duration) error {
	ctx, out := contextOf(cmd), cmd.OutOrStdout()
	view := &liveView{w: out, tty: isTerminal(out), color: os.Getenv("NO_COLOR") == ""}
	tick := every
	if view.tty {
		tick = 100 * time.Millisecond
	}
	var run *taugridv1.TauRun
	lastPoll := time.Time{}
	for frame := 0; ; frame++ {
		if clk.Since(lastPoll) >= every {
			got, err := src.Get(ctx, id)
			var missing notFoundError
			switch {
			case err == nil:
				run = got
			case errors.As(err, &missing) && run == nil:
				// The controller has not picked the run ref up yet.
			case ctx.Err() != nil:
			default:
				return err
			}
			lastPoll = clk.Now()
		}
		view.draw(run, id, frame)
		if run != nil {
			switch run.Status.Phase {
			case taugridv1.PhaseSucceeded:
				return nil
			case taugridv1.PhaseFailed, taugridv1.PhaseCancelled:
				return reportedError{runFailedError{fmt.Errorf("run %s %s", id, strings.ToLower(string(run.Status.Phase)))}}
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "Stopped following; run %s goes on: tau status %s\n", id, id)
			return nil
		case <-clk.After(tick):
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// liveView draws a followed run.
type liveView struct {
	w          io.Writer
	tty, color bool
	lines      int    // lines drawn last frame, to redraw over
	last       string // plain mode: the last line printed
}

func (v *liveView) draw(run *taugridv1.TauRun, id string, frame int) {
	if !v.tty {
		v.plain(run)
		return
	}
	var b strings.Builder
	if v.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", v.lines) // up, clear to the end
	}
	lines := v.frame(run, id, frame)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	v.lines = len(lines)
	_, _ = io.WriteString(v.w, b.String())
}

func (v *liveView) frame(run *taugridv1.TauRun, id string, frame int) []string {
	spin := spinner[frame%len(spinner)]
	if run == nil {
		return []string{fmt.Sprintf("%s run %s: waiting for the controller to pick up the run ref", spin, id)}
	}
	phase := run.Status.Phase
	if phase.Final() {
		spin = map[taugridv1.RunPhase]string{taugridv1.PhaseSucceeded: "✓", taugridv1.PhaseFailed: "✗", taugridv1.PhaseCancelled: "-"}[phase]
	}
	head := fmt.Sprintf("%s run %s  %s", spin, id, v.paint(phase, orDash(string(phase))))
	if t := run.CreationTimestamp.Time; !t.IsZero() {
		head += "  " + elapsed(end(run).Sub(t))
	}
	lines := []string{head}
	ps := run.Status.Phases
	for i, p := range ps {
		until := end(run)
		if i+1 < len(ps) {
			until = ps[i+1].Time.Time
		}
		lines = append(lines, fmt.Sprintf("    %-10s %8s", p.Phase, elapsed(until.Sub(p.Time.Time))))
	}
	if msg := run.Status.Message; msg != "" {
		lines = append(lines, "  "+truncate(msg, 100))
	}
	return lines
}

// end is when the run ended, or now.
func end(run *taugridv1.TauRun) time.Time {
	if run.Status.Phase.Final() && len(run.Status.Phases) > 0 {
		return run.Status.Phases[len(run.Status.Phases)-1].Time.Time
	}
	return clk.Now()
}

func (v *liveView) plain(run *taugridv1.TauRun) {
	if run == nil || run.Status.Phase == "" {
		return
	}
	line := string(run.Status.Phase)
	if msg := run.Status.Message; msg != "" && !strings.EqualFold(msg, line) {
		line += ": " + truncate(msg, 120)
	}
	if line != v.last {
		fmt.Fprintf(v.w, "  %s  %s\n", clk.Now().Format("15:04:05"), line)
		v.last = line
	}
}

func (v *liveView) paint(p taugridv1.RunPhase, s string) string {
	if !v.color {
		return s
	}
	code := map[taugridv1.RunPhase]string{taugridv1.PhaseSucceeded: "32", taugridv1.PhaseFailed: "31", taugridv1.PhaseCancelled: "33",
		taugridv1.PhaseQueued: "33", taugridv1.PhaseRunning: "36"}[p]
	if code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func elapsed(d time.Duration) string {
	d = max(0, d).Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", m, s)
}
