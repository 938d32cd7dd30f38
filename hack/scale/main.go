// Command scale measures one tau-controller on a cluster of many GPU nodes,
// tenants, repositories and runs: the real kube-apiserver, etcd, Kueue,
// kube-scheduler, Job controller and kwok nodes from test/controlplane, the
// real tau-controller binary, and the tests' git http-backend server. Runs
// are requested as run refs and run tags written to the repositories at a
// set rate, each followed by the nudge a push webhook gives; the harness
// ends each pod after a run time spread between two bounds.
//
// At each checkpoint (a number of runs ended) it prints a row: how far the
// TauRuns' phases lag behind Kueue's admission and the pods (from watch
// timestamps), the controller's RSS and CPU (from /proc), API requests per
// run (client-go's counter on the controller's /metrics), forge calls per
// run (a counting forge stand-in), git operations per minute; then the
// submission rate, the time to drain, and the idle polls' CPU. The
// controller's heap, goroutines and a 20 s CPU profile at each checkpoint
// are saved in -out, with a 20 s CPU profile of the API server.
//
//	make scale SCALE_FLAGS='-nodes 100 -repos 100 -runs 1000'
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/forge/forgetest"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/test/controlplane"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type config struct {
	nodes, tenants, repos, runs int
	rate                        float64
	minRun, maxRun, interval    time.Duration
	idle, timeout               time.Duration
	checkpoints                 []int
	out                         string
	memLimit                    int64   // the controller's memory cgroup limit, bytes; 0: none
	clusterQPS                  float32 // the scheduler's and Job controller's request rate
	startDeadline               time.Duration
	nodeLease                   time.Duration // how long a node's lease lasts (kwok renews it every quarter)
	kueueJobWorkers             int           // Kueue's Job and Workload reconciler workers (0: its shipped 5)
	jobSyncs                    int           // the Job controller's --concurrent-job-syncs (0: the control plane's 10)
	ctrlArgs                    []string      // more tau-controller flags
}

type harness struct {
	cfg     config
	root    string
	dir     string
	env     *controlplane.Env
	k8s     client.Client // env's, with TauGrid's types
	git     *gittest.HTTPServer
	gitRoot string
	gitURL  string
	gitEnv  []string
	commit  string
	forge   *forgetest.Server // the statuses it accepted or refused
	forgeIn *counting         // every request the forge stand-in answered
	ctrl    *controller
	cluster *cluster
	rec     *recorder
	exits   chan types.NamespacedName
	// exitsDue counts the pods past their run time whose exit the
	// harness has not written yet: above a handful, the harness, not the
	// cluster, is what keeps them running.
	exitsDue atomic.Int64
	probe    probe
	watches  watchStats // the harness's own watches: events, lateness, restarts
	started  time.Time

	forgeURL string // the forge stand-in, behind forgeIn

	offered  atomic.Int64
	offerEnd time.Time
}

func main() {
	var cfg config
	var checkpoints string
	flag.IntVar(&cfg.nodes, "nodes", 100, "kwok nodes of 8 H200s")
	flag.IntVar(&cfg.tenants, "tenants", 20, "tenants: a namespace and a ClusterQueue each, in cohorts of five")
	flag.IntVar(&cfg.repos, "repos", 100, "TauRepositories, spread over the tenants")
	flag.IntVar(&cfg.runs, "runs", 1000, "runs requested")
	flag.Float64Var(&cfg.rate, "rate", 50, "runs requested per second")
	flag.DurationVar(&cfg.minRun, "min-run-time", 10*time.Second, "shortest pod run time")
	flag.DurationVar(&cfg.maxRun, "max-run-time", 60*time.Second, "longest pod run time")
	flag.DurationVar(&cfg.interval, "interval", time.Minute, "each repository's poll interval")
	flag.DurationVar(&cfg.idle, "idle", 2*time.Minute, "idle time after the drain in which the polls' CPU is measured")
	flag.DurationVar(&cfg.timeout, "timeout", time.Hour, "give up after this long")
	flag.StringVar(&checkpoints, "checkpoints", "", "runs ended at which to report, comma separated (default: a tenth, half, all)")
	flag.StringVar(&cfg.out, "out", "", "directory for the controller's profiles and log (default: a new one under the user cache)")
	memLimit := flag.String("controller-memory-limit", "1Gi", "run the controller in a memory cgroup of this limit, as the chart's resources.limits.memory does (its default); 0: none")
	flag.DurationVar(&cfg.startDeadline, "start-deadline", 2*time.Hour, "the platform's start_deadline: how long an admitted run's pods may take to start before it fails (the example platform's is 10m)")
	flag.DurationVar(&cfg.nodeLease, "node-lease", 4*time.Minute, "how long a node's lease lasts; kwok renews it every quarter of that, as the kubelet does (the kubelet's is 40s: at 1,000 nodes, 79-92 of this machine's 2-core API server's 165-236 requests a second, which a real cluster's control plane serves on cores of its own)")
	flag.IntVar(&cfg.kueueJobWorkers, "kueue-job-workers", 0, "Kueue's Job and Workload reconciler workers, its Configuration's controller.groupKindConcurrency (0: Kueue's shipped 5; docs/operations.md)")
	flag.IntVar(&cfg.jobSyncs, "job-syncs", 0, "how many Jobs kube-controller-manager's Job controller syncs at once, its --concurrent-job-syncs (0: the test control plane's 10; Kubernetes ships 5; docs/operations.md)")
	qps := flag.Float64("cluster-qps", 100, "request rate of the kube-scheduler and the Job controller (kube-controller-manager), burst twice that, as a cluster of this size runs them (Kubernetes' own defaults, 50 and 20, pace pod creation to a few Jobs a second); 0: their defaults")
	ctrlArgs := flag.String("controller-flags", "", "more tau-controller flags, space separated (e.g. --run-workers 64)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	cfg.ctrlArgs, cfg.clusterQPS = strings.Fields(*ctrlArgs), float32(*qps)
	if err := cfg.check(checkpoints, *memLimit); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func (c *config) check(checkpoints, memLimit string) error {
	q, err := resource.ParseQuantity(memLimit)
	if err != nil || q.Sign() < 0 || (q.Sign() > 0 && q.Value() < 64<<20) {
		return fmt.Errorf("-controller-memory-limit %q: want a quantity such as 1Gi or 512Mi (at least 64Mi), or 0 for none", memLimit)
	}
	c.memLimit = q.Value()
	if c.nodes < 1 || c.tenants < 1 || c.repos < c.tenants || c.runs < 1 || c.rate <= 0 {
		return fmt.Errorf("-nodes, -tenants, -runs and -rate must be positive and -repos at least -tenants (got %d, %d, %d, %g, %d)",
			c.nodes, c.tenants, c.runs, c.rate, c.repos)
	}
	if c.maxRun < c.minRun {
		return fmt.Errorf("-max-run-time %s is below -min-run-time %s", c.maxRun, c.minRun)
	}
	if c.nodeLease < 4*time.Second || c.nodeLease%time.Second != 0 {
		return fmt.Errorf("-node-lease %s: want whole seconds, at least 4s (the kubelet's is 40s)", c.nodeLease)
	}
	if c.jobSyncs < 0 {
		return fmt.Errorf("-job-syncs %d: want 0 (the test control plane's 10) or more", c.jobSyncs)
	}
	if c.kueueJobWorkers < 0 {
		return fmt.Errorf("-kueue-job-workers %d: want 0 (Kueue's shipped 5) or more", c.kueueJobWorkers)
	}
	if checkpoints == "" {
		c.checkpoints = []int{max(1, c.runs/10), max(1, c.runs/2), c.runs}
		return nil
	}
	for f := range strings.SplitSeq(checkpoints, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > c.runs {
			return fmt.Errorf("-checkpoints: %q is not a number of runs from 1 to -runs (%d)", f, c.runs)
		}
		c.checkpoints = append(c.checkpoints, n)
	}
	return nil
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(h.started).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, cfg config) (err error) {
	h := &harness{cfg: cfg, rec: newRecorder(), exits: make(chan types.NamespacedName, 1024), started: time.Now()}
	if h.root, err = controlplane.RepoRoot(); err != nil {
		return err
	}
	if h.dir, err = os.MkdirTemp("", "taugrid-scale-"); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(h.dir) }()
	if cfg.out == "" {
		cache, _ := os.UserCacheDir()
		cfg.out = filepath.Join(cache, "taugrid", "scale", time.Now().Format("20060102-150405"))
		h.cfg.out = cfg.out
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	defer func() {
		h.ctrl.stop()
		if h.env != nil {
			_ = h.env.Stop()
		}
		if h.ctrl != nil {
			_ = os.Rename(h.ctrl.log, filepath.Join(cfg.out, "tau-controller.log"))
		}
	}()
	if err := h.setUp(ctx); err != nil {
		return err
	}
	return h.measure(ctx)
}

// setUp starts the cluster, the git server, the forge and the controller,
// and registers the platform and the repositories.
func (h *harness) setUp(ctx context.Context) error {
	h.logf("starting the control plane (API server, etcd, Kueue, scheduler, Job controller, kwok)")
	var err error
	h.env, err = controlplane.Start(ctx, controlplane.Options{Kueue: true, Nodes: true, ClientQPS: h.cfg.clusterQPS, NodeLease: h.cfg.nodeLease,
		KueueJobWorkers: h.cfg.kueueJobWorkers, JobSyncs: h.cfg.jobSyncs,
		CRDDirectoryPaths: []string{filepath.Join(h.root, "api", "crds")}})
	if err != nil {
		return err
	}
	if err := taugridv1.AddToScheme(h.env.Scheme); err != nil {
		return err
	}
	// The harness's own client (nodes, registration, nudges, ending pods)
	// must not be what paces the cluster: client-go's default is 5
	// requests a second, which held pod ends to about 2.5 a second.
	fast := rest.CopyConfig(h.env.Config)
	fast.QPS, fast.Burst = harnessQPS, 2*harnessQPS
	if h.k8s, err = client.New(fast, client.Options{Scheme: h.env.Scheme}); err != nil {
		return err
	}
	h.cluster = &cluster{k8s: h.k8s}
	if h.cluster.kube, err = kubernetes.NewForConfig(fast); err != nil {
		return err
	}
	h.logf("adding %d nodes of 8 GPUs in racks of %d, blocks of %d racks", h.cfg.nodes, nodesPerRack, racksPerBlk)
	if err := h.addNodes(ctx); err != nil {
		return err
	}
	h.forge = forgetest.New(forge.Gitea, forgeToken)
	h.forgeIn = &counting{next: h.forge}
	if h.forgeURL, err = serve(h.forgeIn); err != nil {
		return err
	}
	if err := h.startGit(); err != nil {
		return err
	}
	h.logf("creating the platform repository and %d research repositories", h.cfg.repos)
	if err := h.pushRepos(); err != nil {
		return err
	}
	h.logf("building and starting tau-controller")
	if err := h.startController(ctx); err != nil {
		return err
	}
	h.logf("registering the platform, %d tenants and %d repositories", h.cfg.tenants, h.cfg.repos)
	if err := h.register(ctx); err != nil {
		return err
	}
	if use, err := h.ctrl.usage(); err == nil {
		h.logf("set up in %s: %d nodes, %d repositories polled once; controller RSS %.0f MiB (peak %.0f), CPU %.1f s",
			time.Since(h.started).Round(time.Second), h.cfg.nodes, h.cfg.repos, use.rssMiB, use.peakMiB, use.cpu.Seconds())
	}
	return nil
}

// harnessQPS is the harness's own client's request rate.
const harnessQPS = 1000

// exiters is how many pod exits the harness writes at once (see exiter).
const exiters = 32

// measure offers the runs, reports at each checkpoint, then measures the
// drain and the idle polls.
func (h *harness) measure(ctx context.Context) error {
	wc, err := client.NewWithWatch(h.env.Config, client.Options{Scheme: h.env.Scheme})
	if err != nil {
		return err
	}
	h.watchAll(ctx, wc)
	if err := h.probe.run(ctx, h.k8s, wc, &h.watches); err != nil {
		return err
	}
	for range exiters {
		go h.exiter(ctx)
	}
	base, err := h.sample()
	if err != nil {
		return err
	}
	h.logf("requesting %d runs at %g/s on %d repositories", h.cfg.runs, h.cfg.rate, h.cfg.repos)
	start := time.Now()
	offered := make(chan error, 1)
	go func() { offered <- h.offer(ctx) }()
	fmt.Print(tableHead)
	h.reportCluster(ctx)
	prev, offerErr, said, told, lastSaid := base, error(nil), time.Now(), time.Now(), base
	for _, cp := range h.cfg.checkpoints {
		for {
			cur, err := h.sample()
			if err != nil {
				return err
			}
			if time.Since(said) > 15*time.Second {
				h.progress(cur, lastSaid)
				said, lastSaid = time.Now(), cur
			}
			if time.Since(told) > time.Minute {
				told = time.Now()
				h.reportCluster(ctx)
			}
			if cur.ended >= cp {
				h.checkpoint(os.Stdout, base, prev, cur)
				h.profileAt(ctx, cp)
				prev = cur
				break
			}
			select {
			case offerErr = <-offered:
				if offerErr != nil {
					return offerErr
				}
			case <-ctx.Done():
				// What was reached is a row too, with its profiles: the
				// ceiling is what a run that does not finish measures.
				fmt.Println("\nwhen stopped (the timeout or an interrupt):")
				h.checkpoint(os.Stdout, base, prev, cur)
				h.profileAt(context.Background(), cur.ended)
				return fmt.Errorf("%w: %d of %d runs ended, %d requested (controller log: %s)", ctx.Err(), cur.ended, h.cfg.runs, h.offered.Load(), h.ctrl.log)
			case <-time.After(time.Second):
			}
		}
	}
	h.summary(start, prev)
	return h.idlePolls(ctx)
}

// progress logs the requests made, the runs by phase, and the
// controller's work queues and reconciles a second since prev.
func (h *harness) progress(c, prev counters) {
	h.rec.mu.Lock()
	phases := map[string]int{}
	for _, t := range h.rec.runs {
		phases[string(t.phase)]++
	}
	h.rec.mu.Unlock()
	secs := c.at.Sub(prev.at).Seconds()
	var queues []string
	for _, name := range slices.Sorted(maps.Keys(c.queued)) {
		if c.queued[name] > 0 || c.reconciles[name] > prev.reconciles[name] {
			queues = append(queues, fmt.Sprintf("%s %.0f queued, %.1f/s", name, c.queued[name], (c.reconciles[name]-prev.reconciles[name])/secs))
		}
	}
	h.logf("%d requested, runs by phase %v, controller RSS %.0f MiB, CPU %.1f s; work queues: %s",
		h.offered.Load(), phases, c.use.rssMiB, c.use.cpu.Seconds(), strings.Join(queues, ", "))
}

// profileAt saves the controller's heap and goroutines at a checkpoint,
// then a 20 s CPU profile of the controller and one of the API server in
// the background (the API server is the ceiling: its profile says which
// requests cost it most).
func (h *harness) profileAt(ctx context.Context, ended int) {
	name := func(kind string) string { return filepath.Join(h.cfg.out, fmt.Sprintf("%s-%d.pprof", kind, ended)) }
	for kind, d := range map[string]time.Duration{"heap": 0, "goroutine": -1} {
		if err := h.ctrl.profile(name(kind), d); err != nil {
			h.logf("%s profile: %v", kind, err)
		}
	}
	go func() {
		if err := h.ctrl.profile(name("cpu"), 20*time.Second); err != nil && ctx.Err() == nil {
			h.logf("CPU profile: %v", err)
		}
	}()
	go func() {
		if err := h.cluster.profile(ctx, name("apiserver-cpu"), 20*time.Second); err != nil && ctx.Err() == nil {
			h.logf("the API server's CPU profile: %v", err)
		}
	}()
}

// summary prints the submission rate and the drain time.
func (h *harness) summary(start time.Time, last counters) {
	h.rec.mu.Lock()
	var firstJob, lastJob, lastEnd time.Time
	jobs := 0
	for _, t := range h.rec.runs {
		if !t.job.IsZero() {
			jobs++
			if firstJob.IsZero() || t.job.Before(firstJob) {
				firstJob = t.job
			}
			lastJob = later(lastJob, t.job)
		}
		lastEnd = later(lastEnd, t.runDone)
	}
	phases := map[string]int{}
	for _, t := range h.rec.runs {
		phases[string(t.phase)]++
	}
	h.rec.mu.Unlock()
	offerFor := h.offerEnd.Sub(start)
	fmt.Printf("\nrequested %d runs in %s (%.1f/s offered); %d Jobs created from %s to %s after the first request: %.1f submissions/s\n",
		h.cfg.runs, offerFor.Round(time.Millisecond), float64(h.cfg.runs)/offerFor.Seconds(), jobs,
		firstJob.Sub(start).Round(time.Millisecond), lastJob.Sub(start).Round(time.Millisecond), float64(jobs)/lastJob.Sub(start).Seconds())
	fmt.Printf("drain: the last run ended %s after the last request; runs by phase: %v\n", lastEnd.Sub(h.offerEnd).Round(time.Millisecond), phases)
	fmt.Printf("controller: RSS %.0f MiB, peak %.0f MiB, %.1f s CPU since start; forge status posts %d, forge requests of any kind %d since start; profiles in %s\n",
		last.use.rssMiB, last.use.peakMiB, last.use.cpu.Seconds(), last.forge, last.forgeAll, h.cfg.out)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// idlePolls measures the controller with nothing to do but poll: its CPU
// over the idle window per ref listing (an upper bound: resyncs and the
// janitor count too).
func (h *harness) idlePolls(ctx context.Context) error {
	if h.cfg.idle <= 0 {
		return nil
	}
	h.logf("idle for %s", h.cfg.idle)
	a, err := h.sample()
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(h.cfg.idle):
	}
	b, err := h.sample()
	if err != nil {
		return err
	}
	lists := b.gitList - a.gitList
	cpu := b.use.cpu - a.use.cpu
	var verbs []string
	for _, m := range []string{"GET", "LIST", "POST", "PUT", "PATCH", "DELETE"} {
		if d := b.api[m] - a.api[m]; d > 0 {
			verbs = append(verbs, fmt.Sprintf("%s %.0f", m, d))
		}
	}
	fmt.Printf("idle: %.0f ref listings in %s (%.1f a minute), controller CPU %.2f s (%.1f ms a listing, all idle work included), API requests %.0f (%s), forge requests %d\n",
		lists, h.cfg.idle, lists/h.cfg.idle.Minutes(), cpu.Seconds(), float64(cpu.Milliseconds())/max(1, lists), b.apiTotal()-a.apiTotal(), strings.Join(verbs, ", "), b.forgeAll-a.forgeAll)
	return nil
}

// counting counts the requests it passes on.
type counting struct {
	next http.Handler
	n    atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.next.ServeHTTP(w, r)
}
