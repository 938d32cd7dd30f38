package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// dispatchedFixture is a MultiKueue manager and one worker, "gpu-east",
// each a real API server: in the manager the TauRun, whose attempt runs on
// the worker, and a stale pod with the run's labels whose log must never
// be shown; in the worker the attempt's pod, its log served by a stand-in
// kubelet behind the worker's pods/log. The controller's runs API reads
// the worker through its kubeconfig Secret, as tau-controller does.
type dispatchedFixture struct {
	manager, worker client.Client
	kubelet         *controlplane.Kubelet
	run             *taugridv1.TauRun
	pod             string
	apiURL          string
	metrics         *prometheus.Registry
	managerCfg      string // the manager's kubeconfig file
	workerCfg       string // the worker's
}

const (
	dispatchedID     = "r-20261201-090000-9c1d2e"
	dispatchedWorker = "gpu-east"
)

func newDispatchedFixture(t testing.TB) *dispatchedFixture {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real API server; run without -short")
	}
	envs := startControlPlanes(t, 2)
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	f := &dispatchedFixture{managerCfg: envs[0].Kubeconfig, workerCfg: envs[1].Kubeconfig}
	var err error
	if f.manager, err = client.New(envs[0].Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	if f.worker, err = client.New(envs[1].Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	f.seedManager(t)
	f.seedWorker(t)
	f.apiURL = f.startAPI(t, envs[0].Config, s)
	t.Setenv("TAU_TOKEN", "team-a-token-value")
	t.Setenv("TAU_API_URL", "")
	return f
}

// startControlPlanes starts n bare control planes, one after the other
// (side by side, their binaries' copies can be busy as another forks).
func startControlPlanes(t testing.TB, n int) []*controlplane.Env {
	envs := make([]*controlplane.Env, n)
	for i := range envs {
		envs[i] = controlplane.ForTest(t, controlplane.Options{CRDDirectoryPaths: []string{"../../api/crds"}})
	}
	return envs
}

func (f *dispatchedFixture) seedManager(t testing.TB) {
	ctx := context.Background()
	ref := RunRefPrefix + dispatchedID
	commit := strings.Repeat("d", 40)
	f.run = &taugridv1.TauRun{
		ObjectMeta: metav1.ObjectMeta{Name: runs.RunName("research", ref, commit, "default"), Namespace: "team-a",
			Labels: map[string]string{taugridv1.LabelRefHash: runs.RefHash(ref)}},
		Spec: taugridv1.TauRunSpec{Repository: "research", Commit: commit, Target: "default",
			Trigger: taugridv1.Trigger{Kind: taugridv1.TriggerRunRef, Ref: ref, Requester: "alice@example.com"}},
	}
	f.pod = f.run.Name + "-1-q8z4w"
	kubeconfig, err := os.ReadFile(f.workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tau-system"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-a-token", Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{"token": []byte("team-a-token-value"), "namespace": []byte("team-a")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: controlplane.KubeconfigSecret(dispatchedWorker), Namespace: controlplane.KueueNamespace},
			Data: map[string][]byte{clusters.KubeconfigKey: kubeconfig}},
		clusters.Cluster(clusters.Worker{Name: dispatchedWorker, Secret: controlplane.KubeconfigSecret(dispatchedWorker)}),
		f.run,
		// A pod of the run left in the manager (as if from a bug or an
		// attacker): a dispatched run's log is never read from it.
		runPod(f.run.Name, f.pod, "manager-node"),
	}
	create(t, f.manager, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controlplane.KueueNamespace}})
	create(t, f.manager, objs...)
	controlplane.StartKubelet(t, f.manager, "manager-node").Write("team-a", f.pod, "main", "WRONG CLUSTER\n")
	f.run.Status = taugridv1.TauRunStatus{Phase: taugridv1.PhaseRunning, Message: "running on worker cluster " + dispatchedWorker,
		Phases:   []taugridv1.PhaseTransition{{Phase: taugridv1.PhaseRunning, Time: metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 40, 0, time.UTC))}},
		Workload: &taugridv1.WorkloadStatus{Kind: "Job", Name: f.run.Name + "-1", Queue: "runs", Cluster: dispatchedWorker},
		Attempts: []taugridv1.Attempt{{Number: 1, Workload: f.run.Name + "-1", Cluster: dispatchedWorker}}}
	if err := f.manager.Status().Update(ctx, f.run); err != nil {
		t.Fatal(err)
	}
}

func (f *dispatchedFixture) seedWorker(t testing.TB) {
	create(t, f.worker, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, runPod(f.run.Name, f.pod, "gpu-east-1"))
	f.kubelet = controlplane.StartKubelet(t, f.worker, "gpu-east-1")
	f.kubelet.Write("team-a", f.pod, "main", "epoch 0: loss 1.0 on gpu-east\n")
}

// startAPI serves the controller's runs API for the manager, reading
// dispatched runs' pods from their workers, with its worker request
// metrics in f.metrics.
func (f *dispatchedFixture) startAPI(t testing.TB, cfg *rest.Config, s *runtime.Scheme) string {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.metrics = prometheus.NewRegistry()
	m, err := clusters.NewMetrics(f.metrics)
	if err != nil {
		t.Fatal(err)
	}
	local := runs.PodLogs{Pods: cs.CoreV1()}
	api := &server.RunsAPI{Client: f.manager, Logs: local,
		Tokens: &server.Tokens{Reader: f.manager, Namespace: "tau-system", Clock: clock.RealClock{}},
		Nudger: &server.AnnotationNudger{Client: f.manager, Clock: clock.RealClock{}},
		Clusters: &clusters.Workers{Local: &clusters.Pods{Reader: f.manager, Logs: cs.CoreV1()}, Manager: f.manager,
			Namespace: controlplane.KueueNamespace, Scheme: s, Metrics: m}}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// workerRequests is how many requests the runs API has made to the worker.
func (f *dispatchedFixture) workerRequests(t testing.TB) float64 {
	t.Helper()
	families, err := f.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, fam := range families {
		if !strings.HasSuffix(fam.GetName(), "requests_total") {
			continue
		}
		for _, m := range fam.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

func runPod(run, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a",
		Labels: map[string]string{render.LabelRun: run, render.LabelAttempt: "1"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "python:3.12"}}}}
}

func create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// kubeconfigWith writes a kubeconfig of the given contexts, each the
// whole of one kubeconfig file, the first current.
func kubeconfigWith(t testing.TB, contexts ...[2]string) string {
	t.Helper()
	out := clientcmdapi.NewConfig()
	for i, c := range contexts {
		in, err := clientcmd.LoadFromFile(c[1])
		if err != nil {
			t.Fatal(err)
		}
		cur := in.Contexts[in.CurrentContext]
		out.Clusters[c[0]] = in.Clusters[cur.Cluster]
		out.AuthInfos[c[0]] = in.AuthInfos[cur.AuthInfo]
		ctx := cur.DeepCopy()
		ctx.Cluster, ctx.AuthInfo = c[0], c[0]
		out.Contexts[c[0]] = ctx
		if i == 0 {
			out.CurrentContext = c[0]
		}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// With a kubeconfig, a run dispatched to a worker is read from the
// worker: through the context named after its cluster when the user has
// one; without one, tau says where the run is and how to reach it, and
// never shows the manager's pod of the same run.
func TestDirectModeReadsADispatchedRunFromTheWorkersContextOrSaysWhereItIs(t *testing.T) {
	f := newDispatchedFixture(t)
	both := kubeconfigWith(t, [2]string{"manager", f.managerCfg}, [2]string{dispatchedWorker, f.workerCfg})
	managerOnly := kubeconfigWith(t, [2]string{"manager", f.managerCfg})
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))

	out, _, err := tau(t, "logs", dispatchedID, "--kubeconfig", both, "-n", "team-a")
	if err != nil || out != "epoch 0: loss 1.0 on gpu-east\n" {
		t.Errorf("tau logs through the worker's context = %q, %v; want the worker pod's log", out, err)
	}
	out, _, err = tau(t, "diagnose", dispatchedID, "--kubeconfig", both, "-n", "team-a")
	if err != nil {
		t.Fatalf("tau diagnose: %v", err)
	}
	for _, want := range []string{f.pod, "epoch 0: loss 1.0 on gpu-east"} {
		if !strings.Contains(out, want) {
			t.Errorf("tau diagnose lacks %q:\n%s", want, out)
		}
	}
	out, _, err = tau(t, "status", dispatchedID, "--kubeconfig", managerOnly, "-n", "team-a")
	if err != nil || !strings.Contains(out, "on cluster "+dispatchedWorker) {
		t.Errorf("tau status = %q, %v; want it to name the worker", out, err)
	}

	for _, cmd := range []string{"logs", "diagnose"} {
		out, _, err := tau(t, cmd, dispatchedID, "--kubeconfig", managerOnly, "-n", "team-a")
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		for _, want := range []string{"runs on worker cluster gpu-east", `no context named "gpu-east"`, "it has: [manager]", "TAU_API_URL"} {
			if !strings.Contains(msg, want) {
				t.Errorf("tau %s without the worker's context: err %q lacks %q", cmd, msg, want)
			}
		}
		if exitCode(err) != exitUsage || strings.Contains(out+msg, "WRONG CLUSTER") {
			t.Errorf("tau %s without the worker's context: exit %d, output %q", cmd, exitCode(err), out)
		}
	}
}

// Through the runs API, a dispatched run's log streams from the pod on the
// worker (stand-in kubelet → the worker's API server → the runs API →
// tau), each line as it is written, in a bounded number of worker calls.
func TestTheRunsAPIStreamsADispatchedRunsLogFromTheWorker(t *testing.T) {
	f := newDispatchedFixture(t)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmd := newRootCmd(pw, io.Discard)
		cmd.SetArgs([]string{"logs", "-f", dispatchedID, "--api-url", f.apiURL, "-n", "team-a"})
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
	if got := next(); got != "epoch 0: loss 1.0 on gpu-east" {
		t.Fatalf("first line %q, want the worker pod's", got)
	}
	f.kubelet.Write("team-a", f.pod, "main", "epoch 1: loss 0.5\n")
	if got := next(); got != "epoch 1: loss 0.5" {
		t.Fatalf("streamed line %q", got)
	}
	f.kubelet.Exit("team-a", f.pod, "main")
	if err := <-done; err != nil {
		t.Fatalf("tau logs -f: %v", err)
	}
	// Per log read, the attempt's pod (a list) and its log (one stream);
	// the first read of a worker also discovers its API groups, once.
	before := f.workerRequests(t)
	if out, _, err := tau(t, "logs", dispatchedID, "--api-url", f.apiURL, "-n", "team-a", "--tail", "1"); err != nil || out != "epoch 1: loss 0.5\n" {
		t.Fatalf("tau logs --tail 1 = %q, %v", out, err)
	}
	if n := f.workerRequests(t) - before; n != 2 {
		t.Errorf("tau logs made %v requests to the worker, want 2", n)
	}
}

// BenchmarkDispatchedLogLine is the latency of a log line of a pod on a
// worker cluster, from the container writing it (the stand-in kubelet)
// to `tau logs -f` printing it: through the runs API (kubelet → worker API
// server → runs API → tau) and through the worker's kubeconfig context
// (kubelet → worker API server → tau). ns/op is one line's latency;
// worker-reqs/follow counts the runs API's requests to the worker per
// follow.
func BenchmarkDispatchedLogLine(b *testing.B) {
	f := newDispatchedFixture(b)
	both := kubeconfigWith(b, [2]string{"manager", f.managerCfg}, [2]string{dispatchedWorker, f.workerCfg})
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"runs API", []string{"--api-url", f.apiURL}},
		{"worker context", []string{"--kubeconfig", both}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			before := f.workerRequests(b)
			lines, stop := f.follow(b, mode.args)
			if !lines.Scan() { // the last line so far: the stream is up
				b.Fatalf("no stream: %v", lines.Err())
			}
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				line := fmt.Sprintf("step %d of %s", i, mode.name)
				start := time.Now()
				f.kubelet.Write("team-a", f.pod, "main", line+"\n")
				for got := ""; got != line; {
					if !lines.Scan() {
						b.Fatalf("the stream ended: %v", lines.Err())
					}
					got = lines.Text()
				}
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			stop()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			if mode.name == "runs API" {
				b.ReportMetric(f.workerRequests(b)-before, "worker-reqs/follow")
			}
		})
	}
}

// follow runs `tau logs -f --tail 1` for the dispatched run until stop.
func (f *dispatchedFixture) follow(b *testing.B, args []string) (*bufio.Scanner, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmd := newRootCmd(pw, io.Discard)
		cmd.SetArgs(append([]string{"logs", "-f", dispatchedID, "--tail", "1", "-n", "team-a"}, args...))
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()
	return bufio.NewScanner(pr), func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		if err := <-done; err != nil {
			b.Errorf("tau logs -f: %v", err)
		}
	}
}
