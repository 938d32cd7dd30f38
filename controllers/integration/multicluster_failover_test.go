package integration

import (
	"context"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runctrl "github.com/taugrid/taugrid/controllers/run"
)

// twinWorkers are two workers that both fit a one-GPU run.
var twinWorkers = map[string]int64{"east": 8, "west": 8}

// ownFleet starts a fleet of its own for t (a test that stops a worker
// cannot share one), with Kueue's worker-lost timeout short unless opts
// sets one, and points
// this package's fixtures at its manager until t ends.
func ownFleet(t *testing.T, opts controlplane.FleetOptions) *controlplane.Fleet {
	t.Helper()
	integration(t)
	namedForTheFleet(t)
	opts.CRDDirectoryPaths = append(opts.CRDDirectoryPaths, "../../api/crds")
	if opts.MultiKueue.WorkerLostTimeout == 0 {
		opts.MultiKueue.WorkerLostTimeout = 5 * time.Second
	}
	opts.MultiKueue.GCInterval = 5 * time.Second
	fl := controlplane.FleetForTest(t, opts)
	c, err := client.New(fl.Manager.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	prevEnv, prevK8s := env, k8s
	env, k8s = fl.Manager, c
	t.Cleanup(func() { env, k8s = prevEnv, prevK8s })
	return fl
}

// failoverTau is the example tau file retrying a lost worker after a
// second.
func failoverTau(t *testing.T) string {
	t.Helper()
	return strings.NewReplacer("retry_on: [Preempted, NodeLost, GPUFault]", "retry_on: [WorkerLost]",
		"initial: 30s", "initial: 1s").Replace(readExample(t, "tau.yaml"))
}

// recording sets a manager's run reconciler to read workers and to send
// its events to rec.
func recording(rec *events.FakeRecorder) func(ctrl.Manager, *controllers) {
	return func(mgr ctrl.Manager, c *controllers) {
		withWorkers(mgr, c)
		c.run.Recorder = rec
	}
}

// runPodOn is the one pod of the run's current attempt on a worker, once
// it runs there.
func runPodOn(t *testing.T, w client.Client, run *taugridv1.TauRun) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 60*time.Second, "the attempt's pod to run on its worker", func() bool {
		var pods corev1.PodList
		if err := w.List(context.Background(), &pods, client.InNamespace(run.Namespace),
			client.MatchingLabels{render.LabelRun: run.Name, render.LabelAttempt: strconv.Itoa(len(run.Status.Attempts))}); err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = &pods.Items[0]
		return pod.Status.Phase == corev1.PodRunning
	})
	return pod
}

// A worker that disappears while a run runs on it: once Kueue's
// worker-lost timeout takes the run's Workload off it, the attempt ends
// as WorkerLost, naming the worker, the retry says so, and the next
// attempt lands on the other worker, which runs it to success. Each
// attempt records its cluster.
func TestARunWhoseWorkerIsLostIsRetriedOnTheOtherWorker(t *testing.T) {
	fl := ownFleet(t, controlplane.FleetOptions{Workers: []string{"east", "west"}})
	f := newRunFixture(t, "mf1")
	f.research.write("tau/failover.yaml", failoverTau(t))
	f.research.commit("retry a lost worker")
	dispatchTenantTo(t, fl, f, "mf1-a", twinWorkers)
	for name := range twinWorkers {
		if err := fl.Workers[name].AddNodes(context.Background(), controlplane.GPUNode("mf1-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	rec := events.NewFakeRecorder(1000)
	m := startManagerWith(t, recording(rec))
	defer m.stop()

	f.research.runRef("one", "target: failover\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/one")
	run = awaitPhase(t, run, taugridv1.PhaseRunning, 90*time.Second, "the run to run on a worker")
	lost := run.Status.Workload.Cluster
	other := map[string]string{"east": "west", "west": "east"}[lost]
	if other == "" {
		t.Fatalf("the run runs on cluster %q, want east or west", lost)
	}
	if err := fl.StopWorker(lost, false); err != nil {
		t.Fatal(err)
	}
	var retried string
	waitFor(t, 120*time.Second, "the attempt to end WorkerLost and the next to run on "+other, func() bool {
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, runctrl.ReasonRetrying) {
				retried = e
			}
		}
		run = getRun(t, f.ns, run.Name)
		return len(run.Status.Attempts) == 2 && run.Status.Phase == taugridv1.PhaseRunning
	})
	first := run.Status.Attempts[0]
	if first.FailureClass != string(taugridv1.FailureWorkerLost) || first.Cluster != lost ||
		!strings.Contains(first.Reason, "worker cluster "+lost+" stopped answering") {
		t.Errorf("attempt 1 ended %s on %q: %q; want WorkerLost on %s, saying it stopped answering", first.FailureClass, first.Cluster, first.Reason, lost)
	}
	for _, want := range []string{"retrying in 1s (attempt 2 of 3) after failed (WorkerLost): worker cluster " + lost} {
		if !strings.Contains(retried, want) {
			t.Errorf("the retry said %q, want %q", retried, want)
		}
	}
	if got := run.Status.Workload.Cluster; got != other {
		t.Fatalf("attempt 2 runs on %q, want %s", got, other)
	}
	w := workerClient(t, fl, other)
	exitPodOn(t, w, runPodOn(t, w, run), 0)
	waitFor(t, 60*time.Second, "the retried run to succeed on "+other, func() bool {
		run = getRun(t, f.ns, run.Name)
		return run.Status.Phase == taugridv1.PhaseSucceeded
	})
	clusters := []string{run.Status.Attempts[0].Cluster, run.Status.Attempts[1].Cluster}
	if !slices.Equal(clusters, []string{lost, other}) {
		t.Errorf("the attempts record clusters %v, want [%s %s]", clusters, lost, other)
	}
}

// hangingProxy forwards TCP to a worker's API server until it hangs: then
// it drops the connections it carries and accepts new ones without ever
// answering, as an API server behind a black-holed network does.
type hangingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	hung   bool
	conns  []net.Conn
}

// newHangingProxy listens on loopback for target until t ends.
func newHangingProxy(t *testing.T, target string) *hangingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangingProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

func (p *hangingProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		hung := p.hung
		p.mu.Unlock()
		if !hung {
			go p.forward(c)
		}
	}
}

// forward copies both ways between c and the target.
func (p *hangingProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

// hang drops every connection and answers no new one.
func (p *hangingProxy) hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hung = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// throughProxy points the manager's kubeconfig Secret of worker at a
// hanging proxy in front of its API server, for Kueue and TauGrid alike,
// and returns the proxy and the kubeconfig's credentials.
func throughProxy(t *testing.T, worker string) (*hangingProxy, [][]byte) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: controlplane.KueueNamespace, Name: controlplane.KubeconfigSecret(worker)}, s); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(s.Data[clusters.KubeconfigKey])
	if err != nil {
		t.Fatal(err)
	}
	var p *hangingProxy
	var creds [][]byte
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		p = newHangingProxy(t, u.Host)
		u.Host = p.ln.Addr().String()
		c.Server = u.String()
	}
	for _, a := range cfg.AuthInfos {
		creds = append(creds, a.ClientKeyData, a.ClientCertificateData)
	}
	if s.Data[clusters.KubeconfigKey], err = clientcmd.Write(*cfg); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	return p, creds
}

// A worker whose API stops answering holds up only the run on it: the run
// on the other worker is followed to success as if nothing happened, and
// the run on the hung worker keeps its phase and says it cannot reach
// that worker, quoting no credential of it. (Kueue's own mirroring of the
// healthy run's Job is slowed by the hung worker: its MultiKueue reconcile
// reads the Workload on every worker, and a hung one costs a TLS handshake
// timeout, about 10 s; TauGrid's share is measured from the mirror on.)
func TestAHungWorkerHoldsUpOnlyTheRunOnIt(t *testing.T) {
	fl := ownFleet(t, controlplane.FleetOptions{Workers: []string{"east", "west"},
		MultiKueue: controlplane.MultiKueueSettings{WorkerLostTimeout: 10 * time.Minute}})
	f := newRunFixture(t, "mf2")
	proxies, creds := map[string]*hangingProxy{}, [][]byte{}
	for name := range twinWorkers {
		p, c := throughProxy(t, name)
		proxies[name], creds = p, append(creds, c...)
	}
	dispatchTenantTo(t, fl, f, "mf2-a", map[string]int64{"east": 1, "west": 1}) // room for one run each
	for name := range twinWorkers {
		if err := fl.Workers[name].AddNodes(context.Background(), controlplane.GPUNode("mf2-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	m := startManagerWith(t, withWorkers)
	defer m.stop()

	f.research.runRef("one", "target: default\n")
	f.research.runRef("two", "target: default\n")
	f.poll(t)
	runs := []*taugridv1.TauRun{f.runOf(t, "refs/tau/runs/one"), f.runOf(t, "refs/tau/runs/two")}
	waitFor(t, 90*time.Second, "both runs to run, one on each worker", func() bool {
		for i := range runs {
			if runs[i] = getRun(t, f.ns, runs[i].Name); runs[i].Status.Phase != taugridv1.PhaseRunning {
				return false
			}
		}
		return true
	})
	hung, healthy := runs[0], runs[1]
	stuck, other := hung.Status.Workload.Cluster, healthy.Status.Workload.Cluster
	if stuck == other {
		t.Fatalf("both runs run on %s, want one on each worker", stuck)
	}
	proxies[stuck].hang()
	w := workerClient(t, fl, other)
	pod := runPodOn(t, w, healthy)
	exited := time.Now()
	exitPodOn(t, w, pod, 0)
	waitFor(t, 60*time.Second, "the run on "+other+" to succeed while "+stuck+" hangs", func() bool {
		return getRun(t, f.ns, healthy.Name).Status.Phase == taugridv1.PhaseSucceeded
	})
	took := time.Since(exited).Round(100 * time.Millisecond)
	mirrored, seen := succeededAfter(t, getRun(t, f.ns, healthy.Name))
	t.Logf("the run on %s succeeded %s after its pod exited, %s hanging: Kueue mirrored the Job's status last at %s, TauGrid saw it at %s",
		other, took, stuck, mirrored.Format(time.TimeOnly), seen.Format(time.TimeOnly))
	if lag := seen.Sub(mirrored); lag > 2*runctrl.WorkerResync {
		t.Errorf("TauGrid saw the run's end %s after Kueue mirrored it, want at most %s: the hung worker held it up", lag, 2*runctrl.WorkerResync)
	}
	want := "cannot reach worker cluster " + stuck + " to follow the run"
	waitFor(t, 60*time.Second, "the run on "+stuck+" to say it cannot reach it", func() bool {
		hung = getRun(t, f.ns, hung.Name)
		return strings.Contains(hung.Status.Message, want)
	})
	if hung.Status.Phase != taugridv1.PhaseRunning {
		t.Errorf("the run on the hung worker is %s, want Running as last seen", hung.Status.Phase)
	}
	for _, c := range creds {
		if len(c) > 64 && strings.Contains(hung.Status.Message, string(c[len(c)/2:len(c)/2+32])) || strings.Contains(hung.Status.Message, "BEGIN") {
			t.Fatalf("the message quotes the worker's credentials: %q", hung.Status.Message)
		}
	}
	t.Logf("the run on the hung worker says: %s", hung.Status.Message)
}

// succeededAfter is when Kueue last mirrored the status of a succeeded
// run's Job from its worker into the manager, and when the run entered
// Succeeded.
func succeededAfter(t *testing.T, run *taugridv1.TauRun) (mirrored, seen time.Time) {
	t.Helper()
	job := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: run.Namespace, Name: run.Status.Workload.Name}, job); err != nil {
		t.Fatal(err)
	}
	// The condition's own time is the worker's (Kueue copies the whole
	// status); the manager's last status write is the mirror's.
	for _, mf := range job.ManagedFields {
		if mf.Subresource == "status" && mf.Time != nil && mf.Time.After(mirrored) {
			mirrored = mf.Time.Time
		}
	}
	for _, p := range run.Status.Phases {
		if p.Phase == taugridv1.PhaseSucceeded {
			seen = p.Time.Time
		}
	}
	if mirrored.IsZero() || seen.IsZero() {
		t.Fatalf("the Job completed at %v, the run succeeded at %v; want both", mirrored, seen)
	}
	return mirrored, seen
}
