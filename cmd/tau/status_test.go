package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestStatusAndListReadRunsWithTheUsersKubeconfig(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real API server; run without -short")
	}
	env := controlplane.ForTest(t, controlplane.Options{CRDDirectoryPaths: []string{"../../api/crds"}})
	s := runtime.NewScheme()
	if err := taugridv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	ref := RunRefPrefix + "r-20261130-101010-abcdef"
	commit := strings.Repeat("c", 40)
	run := &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Name: runs.RunName("research", ref, commit, "ray"), Namespace: "team-a",
			Labels: map[string]string{taugridv1.LabelRefHash: runs.RefHash(ref)}},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: commit, Target: "ray",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: ref, Requester: "alice@example.com"}},
	}
	if err := c.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	run.Status = taugridv1.TauRunStatus{Phase: taugridv1.PhaseQueued,
		Message:  "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 8 more needed",
		Phases:   []taugridv1.PhaseTransition{{Phase: taugridv1.PhaseQueued, Time: metav1.Now()}},
		Workload: &taugridv1.WorkloadStatus{Kind: "RayJob", Name: run.Name + "-1", Queue: "runs"}}
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}

	out, stderr, err := tau(t, "status", "r-20261130-101010-abcdef", "--kubeconfig", env.Kubeconfig, "-n", "team-a")
	if err != nil {
		t.Fatalf("tau status: %v\n%s", err, stderr)
	}
	for _, want := range []string{"Run r-20261130-101010-abcdef", "ray at cccccccccccc", "phase: Queued - couldn't assign flavors", "workload: RayJob", "alice@example.com",
		"start time unknown: its queue's quota is not readable"} {
		if !strings.Contains(out, want) {
			t.Errorf("tau status output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = tau(t, "list", "--kubeconfig", env.Kubeconfig, "-n", "team-a", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SchemaVersion int                `json:"schema_version"`
		Runs          []taugridv1.TauRun `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.SchemaVersion != 1 || len(doc.Runs) != 1 {
		t.Errorf("tau list -o json = %v, %+v; want schema_version 1 and one run", err, doc)
	}
	t.Run("following a run prints each phase and ends with it", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out := &followOutput{}
		go func() {
			// Each phase is written once follow has printed the one before,
			// however slowly it starts on a loaded machine.
			for _, step := range []struct {
				after string
				p     taugridv1.RunPhase
			}{{"Queued", taugridv1.PhaseRunning}, {"Running", taugridv1.PhaseFailed}} {
				p := step.p
				if !out.waitFor(ctx, step.after) {
					return
				}
				cur := &taugridv1.TauRun{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(run), cur); err != nil {
					return
				}
				cur.Status.Phase, cur.Status.Message = p, strings.ToLower(string(p))
				if p == taugridv1.PhaseFailed {
					cur.Status.Message = "failed: exit code 3 (BackoffLimitExceeded)"
				}
				_ = c.Status().Update(ctx, cur)
			}
		}()
		cmd := &cobra.Command{}
		cmd.SetOut(out)
		cmd.SetContext(ctx)
		src, err := kubeSourceFor(env.Kubeconfig, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		err = follow(cmd, src, "r-20261130-101010-abcdef", 20*time.Millisecond)
		if err == nil || !isReported(err) || exitCode(err) != exitRunFailed {
			t.Errorf("following a failed run: err = %v, want a reported failure", err)
		}
		got := out.String()
		for _, want := range []string{"Queued: couldn't assign flavors", "Running\n", "Failed: failed: exit code 3"} {
			if !strings.Contains(got, want) {
				t.Errorf("follow output lacks %q:\n%s", want, got)
			}
		}
	})
	if _, _, err := tau(t, "status", "r-nope", "--kubeconfig", env.Kubeconfig, "-n", "team-a"); err == nil || !strings.Contains(err.Error(), "no run r-nope in namespace team-a") {
		t.Errorf("unknown run: err = %v", err)
	}
}

func TestStatusSaysHowBusyTheGPUsAreAndWarnsWhenIdle(t *testing.T) {
	run := &taugridv1.TauRun{Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseRunning, Attempts: []taugridv1.Attempt{{Number: 1,
		GPUUsage: &taugridv1.GPUUsage{GPUs: 8, Idle: true, Summary: "8 GPUs, 1% busy over the last 10 min; idle: under 5% since 10:02 UTC"}}}}}
	var b strings.Builder
	printRun(&b, run)
	for _, want := range []string{"  gpus: 8 GPUs, 1% busy over the last 10 min; idle: under 5% since 10:02 UTC\n", "  warning: the GPUs are idle by the platform's rule"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tau status lacks %q:\n%s", want, b.String())
		}
	}
}

// tau status shows the current attempt's progress as the run reported it,
// and not an earlier attempt's.
func TestStatusShowsTheCurrentAttemptsReportedProgress(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 3, 1, 16, 5, 0, 0, time.UTC))
	run := &taugridv1.TauRun{Status: taugridv1.TauRunStatus{Phase: taugridv1.PhaseRunning, Attempts: []taugridv1.Attempt{{Number: 1}, {Number: 2}},
		Progress: &taugridv1.RunProgress{Attempt: 2, Percent: 42, Time: at}}}
	var b strings.Builder
	printRun(&b, run)
	if want := "  progress: 42%, as the run said at 2026-03-01T16:05:00Z\n"; !strings.Contains(b.String(), want) {
		t.Errorf("tau status lacks %q:\n%s", want, b.String())
	}
	run.Status.Progress.Attempt = 1
	b.Reset()
	printRun(&b, run)
	if strings.Contains(b.String(), "progress:") {
		t.Errorf("tau status shows attempt 1's progress for attempt 2:\n%s", b.String())
	}
}

// followOutput is what follow prints, safe to read while it writes.
type followOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *followOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *followOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output holds s; false when ctx ends first.
func (o *followOutput) waitFor(ctx context.Context, s string) bool {
	for !strings.Contains(o.String(), s) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// tau list's columns stay aligned whatever a run's message holds: a tab,
// a carriage return, a second line, characters of several bytes, a
// message longer than the column, a run not yet given a phase or a target.
func TestListKeepsItsColumnsAlignedWhateverTheMessagesHold(t *testing.T) {
	mk := func(name, target, phase, msg string) taugridv1.TauRun {
		return taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
			Spec:   taugridv1.TauRunSpec{Target: target, Commit: strings.Repeat("c", 40)},
			Status: taugridv1.TauRunStatus{Phase: taugridv1.RunPhase(phase), Message: msg}}
	}
	list := []taugridv1.TauRun{
		mk("research-a", "train", "Queued", "waits for quota:\tnvidia.com/gpu 8 more needed\r\nsecond line"),
		mk("research-bb", "", "", "création — données « prêtes » "+strings.Repeat("é", 120)),
		mk("research-ccc-with-a-long-name", "ray-pretrain", "Running", "pod\x1b[31m running\x00"),
	}
	var out bytes.Buffer
	if err := printRuns(&out, "table", list); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 1+len(list) {
		t.Fatalf("tau list printed %d lines for %d runs:\n%s", len(lines), len(list), out.String())
	}
	col := func(line, word string) int { return utf8.RuneCountInString(line[:strings.Index(line, word)]) }
	at := col(lines[0], "MESSAGE")
	for i, want := range []string{"waits for quota:", "création", "pod"} {
		if got := col(lines[i+1], want); got != at {
			t.Errorf("row %d's message starts at column %d, the header's at %d:\n%s", i+1, got, at, out.String())
		}
		if n := utf8.RuneCountInString(lines[i+1][strings.Index(lines[i+1], want):]); n > 80 {
			t.Errorf("row %d's message is %d characters, more than the column's 80", i+1, n)
		}
	}
	for _, r := range out.String() {
		if r != '\n' && unicode.IsControl(r) {
			t.Errorf("tau list printed the control character %q: a terminal moves its cursor or changes colour on it", r)
		}
	}
	if !utf8.ValidString(out.String()) {
		t.Error("tau list printed invalid UTF-8 (a character cut in half)")
	}
}
