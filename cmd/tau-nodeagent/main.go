// Command tau-nodeagent watches a node's GPUs through NVML and keeps jobs off
// broken ones: it sets the node condition TauGPUHealthy, taints the node
// taugrid.dev/gpu-unhealthy:NoSchedule when a GPU is broken, records Events and
// serves metrics. It runs as a DaemonSet (nodeagent/deploy), or once from a
// shell (--once -o json) to check a machine.
//
// --once exits 0 when the node's GPUs are healthy, 1 when one is not or the
// cycle failed (the cluster could not be reached or written), 2 on bad flags,
// and 3 when the GPUs cannot be monitored (NVML absent or failing: the verdict
// is Unknown). On a machine with no cluster configured (no --kubeconfig, not in
// a pod) it only reports, as with --dry-run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/taugrid/taugrid/server/httplimit"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/taugrid/taugrid/nodeagent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command line.
type options struct {
	cfg         nodeagent.Config
	kubeconfig  string
	nvmlLibrary string
	metricsAddr string
	once        bool
	output      string
	xidFatal    string
	xidIgnore   string
	apiQPS      float64
	apiBurst    int
	podSocket   string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{cfg: nodeagent.DefaultConfig()}
	fs := flag.NewFlagSet("tau-nodeagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &o.cfg
	fs.StringVar(&c.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME, from the downward API)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster)")
	fs.StringVar(&o.nvmlLibrary, "nvml-library", "", "path of libnvidia-ml.so.1 (default: the loader's search path, then the usual driver mounts)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "address serving /metrics, /gpus (to callers the cluster's TokenReview and SubjectAccessReview admit) and /healthz (to anyone)")
	fs.BoolVar(&o.once, "once", false, "run one cycle, print what was found and done (or, with --dry-run, would be done), and exit")
	fs.StringVar(&o.output, "o", "text", "--once output: text or json")
	fs.BoolVar(&c.DryRun, "dry-run", false, "report only: write nothing to the cluster")
	fs.DurationVar(&c.PollInterval, "poll-interval", c.PollInterval, "interval of the cheap checks")
	fs.DurationVar(&c.SlowInterval, "slow-interval", c.SlowInterval, "interval of the inventory and heavier checks")
	fs.DurationVar(&c.ResyncInterval, "resync-interval", c.ResyncInterval, "interval of reading the node again")
	fs.DurationVar(&c.NVMLRetryInterval, "nvml-retry-interval", c.NVMLRetryInterval, "interval of retrying NVML after it failed to load")
	fs.DurationVar(&c.CallTimeout, "nvml-timeout", c.CallTimeout, "deadline of every NVML call")
	fs.DurationVar(&c.EventWait, "event-wait", c.EventWait, "how long one NVML event wait blocks")
	fs.DurationVar(&c.APITimeout, "api-timeout", c.APITimeout, "deadline of every Kubernetes API request")
	fs.IntVar(&c.ExpectedGPUs, "expected-gpus", 0, "GPUs this node should have (0: its nvidia.com/gpu capacity, else the most seen)")
	fs.IntVar(&c.ExpectedNVLinks, "expected-nvlinks", 0, "NVLinks each GPU should have up (0: those seen up before)")
	fs.StringVar(&o.xidFatal, "xid-fatal", "", "comma-separated XIDs to treat as fatal, besides the catalog's")
	fs.StringVar(&o.xidIgnore, "xid-ignore", "", "comma-separated XIDs to ignore (metrics only), besides the catalog's")
	fs.DurationVar(&c.Recovery.Window, "recovery-window", c.Recovery.Window, "healthy time after a reboot or GPU reset before a fault clears")
	fs.DurationVar(&c.Recovery.WarningHold, "warning-hold", c.Recovery.WarningHold, "how long a warning stays shown after it was last seen")
	fs.Float64Var(&c.Breaker.MaxShare, "breaker-max-share", c.Breaker.MaxShare, "largest share of GPU nodes tainted within --breaker-window")
	fs.DurationVar(&c.Breaker.Window, "breaker-window", c.Breaker.Window, "circuit-breaker window")
	fs.StringVar(&c.GPUNodeSelector, "gpu-node-selector", c.GPUNodeSelector, "label selector of the GPU nodes the circuit breaker counts")
	fs.StringVar(&o.podSocket, "pod-resources-socket", nodeagent.DefaultPodResourcesSocket,
		"the kubelet's PodResources socket, to attribute GPUs to pods (empty: no attribution)")
	fs.DurationVar(&c.UtilizationWindow, "utilization-window", c.UtilizationWindow, "how much per-minute utilisation history /gpus serves")
	fs.Float64Var(&o.apiQPS, "api-qps", 5, "Kubernetes client QPS")
	fs.IntVar(&o.apiBurst, "api-burst", 10, "Kubernetes client burst")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.complete()
}

// complete checks the options and builds the XID policy.
func (o *options) complete() error {
	fatal, err := nodeagent.ParseXIDList(o.xidFatal)
	if err != nil {
		return fmt.Errorf("--xid-fatal: %w", err)
	}
	ignore, err := nodeagent.ParseXIDList(o.xidIgnore)
	if err != nil {
		return fmt.Errorf("--xid-ignore: %w", err)
	}
	o.cfg.XIDs = nodeagent.DefaultXIDPolicy(fatal, ignore)
	switch {
	case o.output != "text" && o.output != "json":
		return fmt.Errorf("-o %q: want text or json", o.output)
	case o.cfg.Breaker.MaxShare <= 0 || o.cfg.Breaker.MaxShare > 1:
		return fmt.Errorf("--breaker-max-share %v: want more than 0, at most 1", o.cfg.Breaker.MaxShare)
	case o.cfg.PollInterval <= 0 || o.cfg.SlowInterval <= 0 || o.cfg.ResyncInterval <= 0 || o.cfg.CallTimeout <= 0:
		return errors.New("intervals and timeouts must be positive")
	case !o.once && o.cfg.NodeName == "":
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "tau-nodeagent:", err)
		}
		return 2
	}
	log := setupLog(stderr)
	kube, kubeErr := setupKube(o)
	if kubeErr != nil {
		log.Error(kubeErr, "connecting to the Kubernetes API")
		if !o.once {
			return 1
		}
		log.Info("reporting only: nothing is written to the cluster")
	}
	pods, closePods := setupPodResources(o, log)
	defer closePods()
	reg := setupRegistry()
	agent, err := nodeagent.New(o.cfg, nodeagent.Deps{NVML: setupNVML(o.nvmlLibrary), Kube: kube, PodResources: pods, Registry: reg, Log: log})
	if err != nil {
		log.Error(err, "building the agent")
		return 1
	}
	if o.once {
		code := runOnce(ctx, agent, o.output, stdout, log)
		if kubeErr != nil {
			code = max(code, 1)
		}
		return code
	}
	guard, err := setupGuard(o, reg)
	if err != nil {
		log.Error(err, "building the guard of /gpus and /metrics")
		return 1
	}
	srv := setupServer(o.metricsAddr, agent.Handler(reg, guard), log)
	defer shutdown(srv)
	log.Info("starting", "node", o.cfg.NodeName, "dryRun", o.cfg.DryRun, "pollInterval", o.cfg.PollInterval)
	if err := agent.Run(ctx); err != nil {
		log.Error(err, "agent stopped")
		return 1
	}
	return 0
}

func runOnce(ctx context.Context, agent *nodeagent.Agent, output string, stdout io.Writer, log logr.Logger) int {
	report, err := agent.Once(ctx)
	if report != nil {
		if output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(report)
		} else {
			_ = report.WriteText(stdout)
		}
	}
	if err != nil {
		log.Error(err, "the cycle failed")
		return 1
	}
	return verdictCode(report.Verdict)
}

// verdictCode is --once's exit status for a verdict.
func verdictCode(v nodeagent.Verdict) int {
	switch v.Status {
	case corev1.ConditionTrue:
		return 0
	case corev1.ConditionFalse:
		return 1
	}
	return 3
}

// setupPodResources connects to the kubelet's PodResources API. --once skips a
// socket that is not there (a machine with no kubelet); the DaemonSet dials it
// anyway, since the kubelet may create it later.
func setupPodResources(o options, log logr.Logger) (nodeagent.PodResources, func()) {
	if o.podSocket == "" {
		return nil, func() {}
	}
	if _, err := os.Stat(o.podSocket); err != nil && o.once {
		return nil, func() {}
	}
	c, closer, err := nodeagent.DialPodResources(o.podSocket)
	if err != nil {
		log.Error(err, "GPUs will not be attributed to pods")
		return nil, func() {}
	}
	return c, func() { _ = closer.Close() }
}

func setupLog(w io.Writer) logr.Logger {
	return logr.FromSlogHandler(slog.NewJSONHandler(w, nil))
}

// driverMounts are where NVML lives when the driver is mounted rather than on
// the loader's path: the GPU operator's driver container, GKE, older images.
var driverMounts = []string{
	"/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
	"/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1",
	"/home/kubernetes/bin/nvidia/lib64/libnvidia-ml.so.1",
	"/usr/local/nvidia/lib64/libnvidia-ml.so.1",
}

// setupNVML picks the NVML library; loading it waits for the agent's Init, which
// reports a missing library instead of failing.
func setupNVML(path string) nvml.Interface {
	if path == "" {
		for _, p := range driverMounts {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		return nvml.New()
	}
	return nvml.New(nvml.WithLibraryPath(path))
}

// setupKube connects to the API server. --once works without one: with
// --dry-run, or on a machine with no cluster configured, it only reports.
func setupKube(o options) (kubernetes.Interface, error) {
	reportOnly := o.once && o.cfg.DryRun
	noCluster := o.kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" && os.Getenv("KUBECONFIG") == ""
	if (reportOnly || o.once) && (o.cfg.NodeName == "" || noCluster) {
		return nil, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		if reportOnly {
			return nil, nil
		}
		return nil, err
	}
	if o.cfg.NodeName == "" {
		return nil, errors.New("--node-name (or $NODE_NAME) is required to update the node")
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = float32(o.apiQPS), o.apiBurst, "tau-nodeagent"
	return kubernetes.NewForConfig(cfg)
}

func setupRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// setupGuard builds what admits callers to /gpus and /metrics: the API
// server's TokenReview and SubjectAccessReview, through a client of its
// own, so that reviews never take the rate the node's writes need.
func setupGuard(o options, reg prometheus.Registerer) (*nodeagent.Guard, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, err
	}
	gc := nodeagent.DefaultGuardConfig()
	// Each review is a TokenReview and a SubjectAccessReview.
	cfg.QPS, cfg.Burst, cfg.UserAgent = float32(2*gc.ReviewsPerSecond+1), 2*gc.ReviewBurst, "tau-nodeagent/reviews"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return nodeagent.NewGuard(kube, gc, nil, reg), nil
}

func setupServer(addr string, h http.Handler, log logr.Logger) *http.Server {
	srv := httplimit.NewServer(addr, h) // the controller's limits: any pod may connect
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serving metrics", "addr", addr)
		}
	}()
	return srv
}

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}
