// Command tau-controller is TauGrid's in-cluster manager: it watches
// platform and research repositories, turns run requests into Kueue
// workloads, follows them, and serves webhooks and source archives.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/taugrid/taugrid/server/httplimit"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/taugrid/taugrid/api/gpus"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/board"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/controllers/admission"
	auditctrl "github.com/taugrid/taugrid/controllers/audit"
	"github.com/taugrid/taugrid/controllers/forgestatus"
	"github.com/taugrid/taugrid/controllers/janitor"
	"github.com/taugrid/taugrid/controllers/notify"
	platformctrl "github.com/taugrid/taugrid/controllers/platform"
	repoctrl "github.com/taugrid/taugrid/controllers/repository"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/runmetrics"
	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/server"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

type options struct {
	metricsAddr, probeAddr, webhookAddr, sourceAddr, apiAddr string
	pprofAddr                                                string
	webhookTrustedProxies                                    string
	leaderElect                                              bool
	qps                                                      float64
	burst                                                    int
	namespace, cacheDir, sourceURL, fetchImage               string
	evidence                                                 evidenceOptions
	janitor                                                  string
	janitorIdle, janitorEvery                                time.Duration
	multiKueueNamespace                                      string
	tenantSecretsRole, serviceAccount                        string
	readGPUUsage                                             bool
	nodeAgentTokenFile                                       string
	metricsSecure                                            bool
	runWorkers, repositoryWorkers, forgeWorkers              int
	statusDetailInterval                                     time.Duration
	notifyPrivate                                            bool
	forgeRate                                                float64
	forgeBurst                                               int
	memoryLimitRatio                                         float64
}

// secretsGrant is what the platform binds in tenant namespaces; nil when
// --tenant-secrets-role is empty.
func (o *options) secretsGrant() *platformctrl.SecretsGrant {
	if o.tenantSecretsRole == "" {
		return nil
	}
	return &platformctrl.SecretsGrant{ClusterRole: o.tenantSecretsRole, ServiceAccount: o.serviceAccount, Namespace: o.namespace}
}

// defaultNamespace is the controller's namespace outside the chart (which
// sets POD_NAMESPACE): the one its RBAC markers name, and the docs install to.
const defaultNamespace = "taugrid-system"

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Prometheus metrics address; 0 disables")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers whose RBAC grants get on /metrics (TokenReview, SubjectAccessReview); false serves plain HTTP to anyone, for local runs only")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "liveness and readiness probe address")
	flag.StringVar(&o.webhookAddr, "webhook-bind-address", ":9292", "git forge webhook receiver address (/hooks/<id>)")
	flag.StringVar(&o.webhookTrustedProxies, "webhook-trusted-proxies", "", "comma-separated CIDRs of the proxies in front of the webhook receiver (an Ingress controller's pods) whose X-Forwarded-For names the client; others' is ignored")
	flag.StringVar(&o.sourceAddr, "source-bind-address", ":9090", "source archive server address (/source/...)")
	flag.StringVar(&o.apiAddr, "api-bind-address", ":8082", "researchers' read-only runs API (/api/v1/...), authenticated by tenant tokens; 0 disables")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Go profiling endpoints (/debug/pprof/), e.g. 127.0.0.1:6060; 0 disables. Never expose it beyond loopback")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles")
	flag.Float64Var(&o.qps, "kube-api-qps", 100, "sustained requests per second to the API server")
	flag.IntVar(&o.burst, "kube-api-burst", 200, "request burst to the API server")
	flag.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", defaultNamespace), "namespace holding TauPlatform Secrets")
	flag.StringVar(&o.cacheDir, "cache-dir", "/var/cache/taugrid", "git object and source archive cache")
	flag.StringVar(&o.sourceURL, "source-url", "http://tau-controller."+defaultNamespace+".svc:9090", "URL at which run pods reach the source server")
	flag.StringVar(&o.fetchImage, "fetch-image", "ghcr.io/taugrid/tau:v0.1.0", "image of the source fetch init container")
	evidenceFlags(flag.CommandLine, &o.evidence)
	flag.StringVar(&o.multiKueueNamespace, "multikueue-namespace", "", "Kueue's namespace in a MultiKueue manager: runs dispatched to worker clusters are followed through the kubeconfig Secrets there; empty: a single cluster")
	flag.StringVar(&o.tenantSecretsRole, "tenant-secrets-role", "", "ClusterRole (granting get on Secrets) the platform binds to --service-account in every tenant namespace, so the controller reads Secrets there and not elsewhere; empty binds nothing, and the controller's own roles must grant what it reads")
	flag.StringVar(&o.serviceAccount, "service-account", "tau-controller", "the controller's ServiceAccount in --namespace, the subject of --tenant-secrets-role")
	flag.StringVar(&o.janitor, "janitor", "release", "quota held for nothing (orphaned or idle reservations, RayJobs KubeRay refused, pods stuck on lost nodes): release, report or off")
	flag.DurationVar(&o.janitorIdle, "janitor-idle-after", 15*time.Minute, "how long an admitted workload may run no pod, or a pod on a lost node stay terminating, before the janitor acts")
	flag.BoolVar(&o.readGPUUsage, "read-gpu-usage", true, "read running attempts' GPU utilisation from the tau-nodeagent pods (in --namespace) once a minute, for the run's summary and the platform's idle-GPU rule")
	flag.StringVar(&o.nodeAgentTokenFile, "node-agent-token-file", runctrl.NodeAgentTokenFile,
		"the controller's ServiceAccount token for the node agents' audience ("+gpus.Audience+"), sent with each read of their /gpus and to nothing else (the chart projects it)")
	flag.DurationVar(&o.janitorEvery, "janitor-interval", time.Minute, "how often the janitor looks")
	flag.IntVar(&o.runWorkers, "run-workers", runctrl.DefaultRunWorkers, "runs reconciled at once (each mostly waits on the API server)")
	flag.DurationVar(&o.statusDetailInterval, "status-detail-interval", runctrl.DefaultDetailInterval,
		"how long after a run's last status write a change that only adds detail to its phase (a message, a queue position) waits to be written; a new phase is written at once; 0 writes every change")
	flag.BoolVar(&o.notifyPrivate, "notify-allow-private-networks", false,
		"let repositories' notification targets be on private, loopback or link-local addresses (an in-house chat server); off, a target's URL cannot reach into the cluster's network")
	flag.IntVar(&o.repositoryWorkers, "repository-workers", repoctrl.DefaultRepositoryWorkers, "repositories polled at once (each mostly waits on its git remote)")
	flag.IntVar(&o.forgeWorkers, "forge-workers", forgestatus.DefaultForgeWorkers, "runs whose commit status is posted at once (each mostly waits on the forge)")
	flag.Float64Var(&o.forgeRate, "forge-rate", float64(forge.DefaultRate), "commit status posts a second per forge credential (API URL and token), which every repository using it shares; the default stays under GitHub's 5,000 requests an hour")
	flag.IntVar(&o.forgeBurst, "forge-burst", forge.DefaultBurst, "commit status posts per forge credential allowed at once above --forge-rate")
	flag.Float64Var(&o.memoryLimitRatio, "memory-limit-ratio", 0.9, "set the Go runtime's soft memory limit (GOMEMLIMIT) to this fraction of the container's cgroup memory limit, so the heap is collected before the container is killed; 0 leaves it; a GOMEMLIMIT in the environment wins")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := validate(o); err != nil {
		ctrl.Log.Error(err, "tau-controller cannot start")
		os.Exit(2)
	}
	setMemoryLimit(o.memoryLimitRatio)
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "tau-controller stopped")
		os.Exit(1)
	}
}

// validate refuses flags no controller could run with.
func validate(o options) error {
	for name, n := range map[string]int{"--run-workers": o.runWorkers, "--repository-workers": o.repositoryWorkers, "--forge-workers": o.forgeWorkers} {
		if n < 1 {
			return fmt.Errorf("%s=%d: want at least 1", name, n)
		}
	}
	if o.forgeBurst < 1 {
		return fmt.Errorf("--forge-burst=%d: want at least 1", o.forgeBurst)
	}
	if !(o.forgeRate > 0) || math.IsInf(o.forgeRate, 0) {
		return fmt.Errorf("--forge-rate=%g: want a number of posts a second above 0", o.forgeRate)
	}
	if _, err := gitsource.ParseTrustedProxies(o.webhookTrustedProxies); err != nil {
		return fmt.Errorf("--webhook-trusted-proxies: %w", err)
	}
	if o.memoryLimitRatio < 0 || o.memoryLimitRatio > 1 {
		return fmt.Errorf("--memory-limit-ratio=%g: want a fraction between 0 (off) and 1", o.memoryLimitRatio)
	}
	return nil
}

// setMemoryLimit sets the runtime's soft memory limit from the
// container's cgroup limit (the chart's resources.limits.memory): without
// one the heap grows to twice what is live before a collection
// (GOGC=100), and at 10,000 runs that was 914 MiB of RSS for a 408 MB heap
// (hack/scale). No cgroup limit (outside a container), or ratio 0, leaves
// the runtime as it is.
func setMemoryLimit(ratio float64) {
	if ratio == 0 {
		return
	}
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(memlimit.FromCgroup))
	switch {
	case err != nil:
		ctrl.Log.Info("no soft memory limit set: no cgroup memory limit read", "reason", err.Error())
	case limit == math.MaxInt64:
		ctrl.Log.Info("no soft memory limit set: the container has no memory limit")
	default:
		ctrl.Log.Info("soft memory limit set", "bytes", limit, "ratio", ratio)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(taugridv1.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(rayv1.AddToScheme(s))
	return s
}

func run(ctx context.Context, o options) error {
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	// How long requests wait for --kube-api-qps before they are sent, and
	// how long the API server then takes: which of the two limits the
	// controller (hack/scale reached the 100 a second).
	crmetrics.RegisterRESTClientMetrics(crmetrics.MetricRateLimiterLatency, crmetrics.MetricRequestLatency)
	// What those requests are, by verb and resource: every client made
	// from cfg, the manager's and the evidence's, is counted.
	apiRequests, err := clusters.NewAPIRequests(crmetrics.Registry)
	if err != nil {
		return err
	}
	cfg.WrapTransport = apiRequests.Wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 newScheme(),
		Metrics:                metricsOptions(o),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		LeaderElection:         o.leaderElect,
		LeaderElectionID:       "tau-controller.taugrid.dev",
		Client:                 shared.ClientOptions(),
		Cache:                  shared.CacheOptions(),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	git, err := gitsource.NewClient(gitsource.Options{CacheDir: o.cacheDir, Registerer: crmetrics.Registry})
	if err != nil {
		return fmt.Errorf("creating the git client: %w", err)
	}
	// One source server: the run reconciler builds archives, the HTTP
	// server hands them to pods.
	sources := &server.Sources{Client: mgr.GetClient(), Git: git, BaseURL: o.sourceURL, FetchImage: o.fetchImage,
		Reviewer: server.KubeTokenReviewer{Client: mgr.GetClient()}, APIReader: mgr.GetAPIReader()}
	policies := &policy.PolicyStore{Client: mgr.GetClient(), Git: git, Namespace: o.namespace}
	ev, page, err := setupEvidence(mgr, cfg, git, sources, policies, o)
	if err != nil {
		return err
	}
	workers, err := setupWorkers(mgr, cfg, o)
	if err != nil {
		return err
	}
	ev.Clusters = workers // a dispatched attempt's evidence is read from its worker
	if err := setupControllers(ctx, mgr, git, sources, policies, ev, page, workers, o); err != nil {
		return err
	}
	if err := setupMetrics(mgr); err != nil {
		return err
	}
	if err := setupJanitor(mgr, workers, o); err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	audits, _ := ev.Store.(evidence.AuditStore) // both stores keep audit logs
	if err := setupServers(mgr, sources, clientset, workers, audits, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// setupControllers wires every controller, in one place: each owns its
// objects and talks to the others only through the API (status fields,
// conditions, annotations), so none is handed another.
func setupControllers(ctx context.Context, mgr manager.Manager, git *gitsource.Client, sources *server.Sources, policies *policy.PolicyStore,
	ev *sealing.EvidenceRecorder, page *evidence.Page, workers clusters.Locator, o options) error {
	c := mgr.GetClient()
	clk := clock.RealClock{}
	for _, ix := range shared.Indexes() {
		if err := mgr.GetFieldIndexer().IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			return err
		}
	}
	posters, err := setupPosters(mgr, o)
	if err != nil {
		return err
	}
	usage, err := setupGPUUsage(mgr, o)
	if err != nil {
		return err
	}
	// One record of the runs' status writes for every controller that
	// writes them: none patches from a copy another's write replaced.
	written := &shared.Written{}
	ev.Written = written
	phaseWrites, err := runctrl.NewPhaseWrites(crmetrics.Registry)
	if err != nil {
		return err
	}
	pulls := &repoctrl.PullRequests{Client: c, Git: git, Policies: policies, Posters: posters}
	steps := []interface{ SetupWithManager(ctrl.Manager) error }{
		&platformctrl.PlatformReconciler{Client: c, Git: git, Policies: policies, Clock: clk, Recorder: mgr.GetEventRecorder("tau-platform"),
			MultiKueueNamespace: o.multiKueueNamespace, Secrets: o.secretsGrant(), AdmissionCheck: true, Posters: posters},
		&admission.Check{Client: c, APIReader: mgr.GetAPIReader(), Clock: clk},
		&admission.Activator{Client: c, Clock: clk},
		&repoctrl.RepositoryReconciler{Client: c, Git: git, Policies: policies, Clock: clk, Recorder: mgr.GetEventRecorder("tau-repository"),
			PullRequests: pulls, Workers: o.repositoryWorkers},
		&runctrl.RunReconciler{Client: c, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Files: &policy.GitFiles{Client: c, Git: git},
			Policies: policies, Sources: sources, Clock: clk, Recorder: mgr.GetEventRecorder("tau-run"), Evidence: page, Clusters: workers,
			GPUUsage: usage, Workers: o.runWorkers, DetailInterval: o.statusDetailInterval, Written: written, Indexed: true, HoldersKept: runctrl.DefaultHoldersKept, PhaseWrites: phaseWrites},
		ev,
		&forgestatus.ForgeReconciler{Client: c, APIReader: mgr.GetAPIReader(), Clock: clk, Recorder: mgr.GetEventRecorder("tau-forge"), Posters: posters, Workers: o.forgeWorkers,
			Written: written},
		&forgestatus.RefusalReporter{Client: c, Posters: posters, Recorder: mgr.GetEventRecorder("tau-forge")},
		&notify.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), Clock: clk, Sender: &notify.Sender{AllowPrivate: o.notifyPrivate},
			Written: written},
	}
	if o.multiKueueNamespace != "" {
		// The workers' queues carry the check too: it is decided there
		// from here, through the kubeconfigs Kueue uses.
		steps = append(steps, &admission.Workers{Manager: c, APIReader: mgr.GetAPIReader(), Namespace: o.multiKueueNamespace, Scheme: mgr.GetScheme(), Clock: clk})
	}
	// Every decision about a run goes to its tenant's audit log, beside
	// the evidence; only the leader writes (a controller runs on the
	// leader only).
	if audits, ok := ev.Store.(evidence.AuditStore); ok {
		steps = append(steps, &auditctrl.AuditReconciler{Client: c, Log: &evidence.AuditLog{Store: audits, Clock: clk}})
	}
	for _, s := range steps {
		if err := s.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %T: %w", s, err)
		}
	}
	return nil
}

// setupPosters builds the forge clients every controller that posts to a
// forge shares, so each credential has one budget.
func setupPosters(mgr manager.Manager, o options) (*forge.Posters, error) {
	metrics, err := forge.NewMetrics(crmetrics.Registry)
	if err != nil {
		return nil, err
	}
	buckets := &forge.Buckets{Rate: rate.Limit(o.forgeRate), Burst: o.forgeBurst}
	if err := crmetrics.Registry.Register(buckets.WaitingGauge()); err != nil {
		return nil, err
	}
	clk := clock.RealClock{}
	return &forge.Posters{Reader: mgr.GetClient(), Clock: clk, Metrics: metrics, GitHubAPIURL: forge.DefaultGitHubAPI,
		AppTokens: &forge.AppTokens{Clock: clk, Metrics: metrics}, Buckets: buckets}, nil
}

func setupGPUUsage(mgr manager.Manager, o options) (runctrl.GPUUsageSource, error) {
	if !o.readGPUUsage {
		return nil, nil
	}
	reads, err := runctrl.NewGPUUsageReads(crmetrics.Registry)
	if err != nil {
		return nil, err
	}
	agents, err := runctrl.AgentPods(mgr.GetConfig(), mgr.GetScheme(), o.namespace)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(agents); err != nil {
		return nil, err
	}
	return &runctrl.NodeAgents{Reader: agents, Namespace: o.namespace, Reads: reads,
		Token: runctrl.ServiceAccountToken(o.nodeAgentTokenFile)}, nil
}

// setupMetrics registers the run collector, which reads TauRuns from the
// manager's cache at each scrape, on the leader only.
func setupMetrics(mgr manager.Manager) error {
	return crmetrics.Registry.Register(&runmetrics.RunCollector{Client: mgr.GetClient(), Clock: clock.RealClock{},
		Log: ctrl.Log.WithName("metrics"), Elected: mgr.Elected()})
}

// setupJanitor runs the quota janitor on the leader.
func setupJanitor(mgr manager.Manager, workers clusters.Locator, o options) error {
	mode := janitor.JanitorMode(o.janitor)
	switch mode {
	case "off":
		return nil
	case janitor.JanitorRelease, janitor.JanitorReport:
	default:
		return fmt.Errorf("--janitor=%s: want release, report or off", o.janitor)
	}
	m, err := janitor.NewJanitorMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}
	return mgr.Add(&janitor.Janitor{Client: mgr.GetClient(), Clock: clock.RealClock{}, Recorder: mgr.GetEventRecorder("tau-janitor"),
		Log: ctrl.Log.WithName("janitor"), Mode: mode, IdleAfter: o.janitorIdle, Every: o.janitorEvery, Metrics: m, Clusters: workers})
}

// setupServers adds the webhook receiver and the source archive server as
// manager runnables, so they start and stop with it.
func setupServers(mgr manager.Manager, sources *server.Sources, clientset kubernetes.Interface, workers clusters.Locator, audits evidence.AuditStore, o options) error {
	c := mgr.GetClient()
	webhookMetrics, err := server.NewWebhookMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}
	nudger := &server.AnnotationNudger{Client: c, Clock: clock.RealClock{}}
	proxies, err := gitsource.ParseTrustedProxies(o.webhookTrustedProxies)
	if err != nil {
		return err
	}
	hooks := http.NewServeMux()
	hooks.Handle("POST "+taugridv1.WebhookPathPrefix+"{id}", webhookMetrics.Wrap(gitsource.NewWebhookHandler(
		&server.WebhookReceivers{Client: c, Forge: gitsource.ForgeGitHub, Namespace: o.namespace}, nudger,
		gitsource.WebhookOptions{Log: ctrl.Log.WithName("webhook"), TrustedProxies: proxies})))
	// Beside the archives, the attempts' pods report their progress.
	pods := http.NewServeMux()
	pods.Handle(server.SourcePathPrefix, sources)
	pods.Handle(server.ProgressPathPrefix, &server.Progress{Client: c, Reviewer: sources.Reviewer, Clock: clock.RealClock{}})
	servers := []*http.Server{
		gitsource.NewWebhookServer(o.webhookAddr, hooks),
		httplimit.NewServer(o.sourceAddr, pods), // archives stream: each write has its own deadline
	}
	if o.apiAddr != "0" {
		api := &server.RunsAPI{Client: c, APIReader: mgr.GetAPIReader(), Logs: runs.PodLogs{Pods: clientset.CoreV1()}, Clusters: workers, Log: mgr.GetLogger().WithName("runs-api"),
			Tokens: &server.Tokens{Reader: mgr.GetAPIReader(), Namespace: o.namespace, Clock: clock.RealClock{}}, Nudger: nudger, Audit: audits,
			Board: &board.Handler{Client: c, Clock: clock.RealClock{}, Log: mgr.GetLogger().WithName("board")}}
		// Followed logs stream for as long as the pod runs: each write has
		// its own deadline, and a token follows only so many at once.
		servers = append(servers, httplimit.NewServer(o.apiAddr, api.Handler()))
	}
	for _, s := range servers {
		if err := mgr.Add(httpRunnable{s}); err != nil {
			return err
		}
	}
	return nil
}

// httpRunnable runs an http.Server until the manager stops.
type httpRunnable struct{ srv *http.Server }

func (h httpRunnable) Start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- h.srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving %s: %w", h.srv.Addr, err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// NeedLeaderElection: webhooks and sources are served by every replica.
func (h httpRunnable) NeedLeaderElection() bool { return false }

// setupWorkers reads the pods of runs dispatched to MultiKueue workers
// through the kubeconfig Secrets in Kueue's namespace; nil (every run's
// pods are local) without --multikueue-namespace.
func setupWorkers(mgr manager.Manager, cfg *rest.Config, o options) (clusters.Locator, error) {
	if o.multiKueueNamespace == "" {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	metrics, err := clusters.NewMetrics(crmetrics.Registry)
	if err != nil {
		return nil, err
	}
	return &clusters.Workers{
		Local:   &clusters.Pods{Reader: mgr.GetClient(), Logs: cs.CoreV1()},
		Manager: mgr.GetAPIReader(), Namespace: o.multiKueueNamespace, Scheme: mgr.GetScheme(), Metrics: metrics,
	}, nil
}
