package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// The run's secret, which its pod echoes to its log.
const leakedSecret = "hf_SuperSecretToken123"

type apiFixture struct {
	c       client.Client
	url     string
	run     *taugridv1.TauRun
	pod     string
	kubelet *controlplane.Kubelet
}

// newAPIFixture starts the real API server, one failed run with a pod that
// read a Secret, two tenant tokens, and the controller's runs API.
func newAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real API server; run without -short")
	}
	env := controlplane.ForTest(t, controlplane.Options{CRDDirectoryPaths: []string{"../../api/crds"}})
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	created := time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC)
	ref := RunRefPrefix + "r-20261130-101500-3f9a2c"
	commit := strings.Repeat("c", 40)
	run := &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Name: runs.RunName("research", ref, commit, "default"), Namespace: "team-a",
			Labels: map[string]string{taugridv1.LabelRefHash: runs.RefHash(ref)}},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: commit, Target: "default",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: ref, Requester: "alice@example.com"}},
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tau-system"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-a-token", Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{"token": []byte("team-a-token-value"), "namespace": []byte("team-a")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-b-token", Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{"token": []byte("team-b-token-value"), "namespace": []byte("team-b")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf", Namespace: "team-a"}, Data: map[string][]byte{"token": []byte(leakedSecret)}},
		run,
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: run.Name + "-1-x7k2p", Namespace: "team-a",
			Labels: map[string]string{render.LabelRun: run.Name, render.LabelAttempt: "1"}},
			Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "main", Image: "python:3.12",
				Env: []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}}}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pod := objs[len(objs)-1].(*corev1.Pod)
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	run.Status = taugridv1.TauRunStatus{Phase: taugridv1.PhaseFailed, Message: "failed (UserError): container main exited with code 3",
		Phases: []taugridv1.PhaseTransition{
			{Phase: taugridv1.PhasePending, Time: metav1.NewTime(created)},
			{Phase: taugridv1.PhaseQueued, Time: metav1.NewTime(created.Add(time.Second))},
			{Phase: taugridv1.PhaseRunning, Time: metav1.NewTime(created.Add(40 * time.Second))},
			{Phase: taugridv1.PhaseFailed, Time: metav1.NewTime(created.Add(5 * time.Minute))}},
		Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: run.Name + "-1", Queue: "runs"},
		Attempts: []taugridv1.Attempt{{Number: 1, Workload: run.Name + "-1", FailureClass: "UserError",
			Reason: "container main exited with code 3", Nodes: []string{"gpu-1"}}}}
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
	// The pod's log, served by a stand-in kubelet behind the API server's
	// real pods/log.
	kubelet := controlplane.StartKubelet(t, c, "gpu-1")
	kubelet.Write("team-a", pod.Name, "main", "epoch 0: loss 1.0\nlogging in with "+leakedSecret+"\nTraceback: ValueError\n")
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := &server.RunsAPI{Client: c, Logs: runs.PodLogs{Pods: cs.CoreV1()},
		Tokens: &server.Tokens{Reader: c, Namespace: "tau-system", Clock: clock.RealClock{}}, Nudger: &server.AnnotationNudger{Client: c, Clock: clock.RealClock{}}}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	t.Setenv("TAU_TOKEN", "team-a-token-value")
	t.Setenv("TAU_API_URL", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // the API, never a kubeconfig
	return &apiFixture{c: c, url: srv.URL, run: run, pod: pod.Name, kubelet: kubelet}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestTheCLIReadsRunsThroughTheControllersAPIWithATenantToken(t *testing.T) {
	f := newAPIFixture(t)
	setClock(t, f.run.CreationTimestamp.Add(90*time.Minute))
	id := "r-20261130-101500-3f9a2c"
	api := []string{"--api-url", f.url, "-n", "team-a"}

	out, stderr, err := tau(t, append([]string{"list"}, api...)...)
	if err != nil {
		t.Fatalf("tau list: %v\n%s", err, stderr)
	}
	golden(t, "list.txt", out)

	out, _, err = tau(t, append([]string{"status", id}, api...)...)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status.txt", strings.ReplaceAll(out, f.run.Name, "RUN"))

	out, _, err = tau(t, append([]string{"list", "-o", "json"}, api...)...)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SchemaVersion int                `json:"schema_version"`
		Runs          []taugridv1.TauRun `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.SchemaVersion != 1 || len(doc.Runs) != 1 || doc.Runs[0].Status.Phase != taugridv1.PhaseFailed {
		t.Errorf("tau list -o json = %v, %+v", err, doc)
	}
	if strings.Contains(out, "managedFields") {
		t.Errorf("the JSON carries managedFields")
	}

	t.Run("logs are masked", func(t *testing.T) {
		out, _, err := tau(t, append([]string{"logs", id, "--tail", "2"}, api...)...)
		if err != nil {
			t.Fatal(err)
		}
		if want := "logging in with ****\nTraceback: ValueError\n"; out != want {
			t.Errorf("tau logs = %q, want %q", out, want)
		}
	})
	t.Run("logs -f streams as the pod writes, masked, until it exits", func(t *testing.T) {
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			cmd := newRootCmd(pw, io.Discard)
			cmd.SetArgs(append([]string{"logs", "-f", id, "--tail", "1"}, api...))
			done <- cmd.Execute()
			pw.Close()
		}()
		lines := bufio.NewScanner(pr)
		next := func() string {
			if !lines.Scan() {
				t.Fatalf("the stream ended early: %v", lines.Err())
			}
			return lines.Text()
		}
		if got := next(); got != "Traceback: ValueError" {
			t.Fatalf("first line %q", got)
		}
		f.kubelet.Write("team-a", f.pod, "main", "retrying with "+leakedSecret+"\n")
		if got := next(); got != "retrying with ****" {
			t.Fatalf("streamed line %q, want it masked", got)
		}
		f.kubelet.Exit("team-a", f.pod, "main")
		if err := <-done; err != nil {
			t.Fatalf("tau logs -f: %v", err)
		}
	})
	t.Run("diagnose names the exit code and masks the secret", func(t *testing.T) {
		out, _, err := tau(t, append([]string{"diagnose", id}, api...)...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"failed (UserError)", "main: exited 3 (Error)", "logging in with ****", "1  UserError"} {
			if !strings.Contains(out, want) {
				t.Errorf("tau diagnose lacks %q:\n%s", want, out)
			}
		}
		js, _, _ := tau(t, append([]string{"diagnose", id, "-o", "json"}, api...)...)
		if strings.Contains(out+js, leakedSecret) {
			t.Errorf("the diagnosis leaks the secret")
		}
	})
	t.Run("bad input and unreachable servers", func(t *testing.T) {
		dead, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		deadURL := "http://" + dead.Addr().String()
		dead.Close()
		for _, tc := range []struct {
			name, token string
			args        []string
			code        int
			msg         string
		}{
			{"unknown run", "team-a-token-value", append([]string{"status", "r-nope"}, api...), exitUsage, "no run r-nope in namespace team-a"},
			{"wrong token", "guess", append([]string{"list"}, api...), exitUsage, "refused the token: invalid token"},
			{"another team's token", "team-b-token-value", append([]string{"list"}, api...), exitUsage, "reads namespace team-b, not team-a"},
			{"no token", "", append([]string{"list"}, api...), exitUsage, "export TAU_TOKEN"},
			{"API down", "team-a-token-value", []string{"list", "--api-url", deadURL, "-n", "team-a"}, exitUnreachable, "cannot reach the TauGrid API"},
			{"bad output format", "team-a-token-value", append([]string{"status", id, "-o", "xml"}, api...), exitUsage, "want table, json or yaml"},
		} {
			t.Setenv("TAU_TOKEN", tc.token)
			_, _, err := tau(t, tc.args...)
			if err == nil || exitCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: err = %v (exit %d), want exit %d and one line with %q", tc.name, err, exitCode(err), tc.code, tc.msg)
			}
		}
	})
}

// The live view, in a real terminal: a spinner and elapsed times redrawn
// in place, then the outcome; the exit code is the run's.
func TestFollowingARunInATerminalRedrawsALiveView(t *testing.T) {
	f := newAPIFixture(t)
	ctx := context.Background()
	// The run has been running for a minute by the CLI's clock.
	c := setClock(t, f.run.Status.Phases[2].Time.Add(time.Minute))
	cur := f.run.DeepCopy()
	cur.Status.Phase, cur.Status.Message = taugridv1.PhaseRunning, "running"
	cur.Status.Phases = cur.Status.Phases[:3]
	if err := f.c.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	screen, shown := make(chan string), &followOutput{}
	go func() {
		_, _ = io.Copy(shown, ptmx)
		screen <- shown.String()
	}()
	go func() {
		// The run ends once the terminal has shown it running and redrawn
		// it once, however slowly follow starts on a loaded machine.
		if !shown.waitFor(ctx, "Running") {
			return
		}
		redraw, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		shown.waitFor(redraw, "\x1b[5A\x1b[J") // the spinner's next frame; the end is shown either way
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(cur), cur); err == nil {
			cur.Status.Phase, cur.Status.Message = taugridv1.PhaseSucceeded, "succeeded"
			cur.Status.Phases = append(cur.Status.Phases, taugridv1.PhaseTransition{Phase: taugridv1.PhaseSucceeded, Time: metav1.NewTime(c.Now())})
			_ = f.c.Status().Update(ctx, cur)
		}
	}()
	t.Setenv("NO_COLOR", "")
	src, err := openSource(&statusOptions{APIURL: f.url, Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{}
	cmd.SetOut(tty)
	cmd.SetContext(ctx)
	if err := follow(cmd, src, "r-20261130-101500-3f9a2c", 200*time.Millisecond); err != nil {
		t.Fatalf("following a run that succeeds: %v", err)
	}
	tty.Close()
	got := <-screen
	for _, want := range []string{"⠋ run r-20261130-101500-3f9a2c", "\x1b[36mRunning\x1b[0m", "\x1b[5A\x1b[J", "✓ run r-20261130-101500-3f9a2c  \x1b[32mSucceeded\x1b[0m", "Running       "} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal lacks %q:\n%q", want, got)
		}
	}
}

// `tau run --wait` with only TAU_API_URL and TAU_TOKEN: no -n, no
// .tau/config.yaml, no kubeconfig. The CLI learns its team from the token
// (GET /api/v1/whoami) and follows the run to its end.
func TestRunWaitNeedsOnlyTheAPIURLAndTheToken(t *testing.T) {
	f := newAPIFixture(t)
	r := newResearcher(t)
	t.Setenv("TAU_API_URL", f.url)
	commit := r.head()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	controller := make(chan error, 1)
	go func() { controller <- standInController(ctx, f.c, r, commit) }()
	var stdout, stderrBuf strings.Builder
	cmd := newRootCmd(&stdout, &stderrBuf)
	cmd.SetArgs([]string{"run", "--wait", "--dir", r.work})
	err := cmd.ExecuteContext(ctx) // a run never found stops following at the deadline
	out, stderr := stdout.String(), stderrBuf.String()
	if err := <-controller; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("tau run --wait: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"Run r-", "requested: tau.yaml at " + commit[:12], "Following it", "Succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("tau run --wait lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr, "no namespace") {
		t.Errorf("asked for a namespace the token names:\n%s%s", out, stderr)
	}

	src, err := openSource(&statusOptions{APIURL: f.url})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.List(context.Background()); err != nil || src.Namespace() != "team-a" {
		t.Errorf("a source without -n reads namespace %q (%v), want team-a, the token's", src.Namespace(), err)
	}
	t.Setenv("TAU_TOKEN", "guess")
	if _, _, err := tau(t, "list", "--api-url", f.url); err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "refused the token: invalid token") {
		t.Errorf("a wrong token without -n: %v (exit %d), want the API's refusal", err, exitCode(err))
	}
}

// standInController does what the repository and run reconcilers would
// for the one run ref `tau run` pushes: a TauRun that succeeds.
func standInController(ctx context.Context, c client.Client, r *researcher, commit string) error {
	var ref string
	for ref == "" {
		out, err := gittest.Git(r.env, "", nil, "-C", r.work, "ls-remote", "origin", "refs/tau/runs/*")
		if err != nil {
			return err
		}
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if _, name, ok := strings.Cut(first, "\t"); ok {
			ref = strings.TrimSuffix(name, "^{}")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no run ref pushed: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	run := &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Name: runs.RunName("research", ref, commit, "default"), Namespace: "team-a",
			Labels: map[string]string{taugridv1.LabelRefHash: runs.RefHash(ref)}},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: commit, Target: "default",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: ref}},
	}
	if err := c.Create(ctx, run); err != nil {
		return err
	}
	now := metav1.Now()
	run.Status = taugridv1.TauRunStatus{Phase: taugridv1.PhaseSucceeded, Message: "succeeded",
		Phases: []taugridv1.PhaseTransition{{Phase: taugridv1.PhasePending, Time: now}, {Phase: taugridv1.PhaseSucceeded, Time: now}}}
	return c.Status().Update(ctx, run)
}
