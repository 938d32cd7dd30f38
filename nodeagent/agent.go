package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Config is how the agent behaves. DefaultConfig gives the production values.
type Config struct {
	NodeName string

	PollInterval      time.Duration // cheap counters
	SlowInterval      time.Duration // inventory, NVLink discovery, retired pages, thresholds
	ResyncInterval    time.Duration // read the node again, to repair drift
	NVMLRetryInterval time.Duration // try loading NVML again after it failed
	CallTimeout       time.Duration // deadline of every NVML call
	EventWait         time.Duration // how long one EventSet.Wait blocks
	APITimeout        time.Duration // deadline of every Kubernetes request

	ExpectedGPUs    int // 0: the node's nvidia.com/gpu capacity, else the most seen
	ExpectedNVLinks int // per GPU; 0: the links seen up before

	XIDs     XIDPolicy
	Recovery RecoveryPolicy
	Breaker  BreakerPolicy
	// GPUNodeSelector selects the GPU nodes the circuit breaker counts.
	GPUNodeSelector string
	// DryRun computes and reports everything but writes nothing to the cluster.
	DryRun bool
	// UtilizationWindow is how far back the per-GPU utilisation history served
	// at /gpus reaches (one point a minute); 0 keeps none.
	UtilizationWindow time.Duration
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		PollInterval:      10 * time.Second,
		SlowInterval:      5 * time.Minute,
		ResyncInterval:    time.Minute,
		NVMLRetryInterval: 30 * time.Second,
		CallTimeout:       5 * time.Second,
		EventWait:         2 * time.Second,
		APITimeout:        10 * time.Second,
		XIDs:              DefaultXIDPolicy(nil, nil),
		Recovery:          RecoveryPolicy{Window: 5 * time.Minute, WarningHold: time.Minute},
		Breaker:           BreakerPolicy{MaxShare: 0.5, Window: 5 * time.Minute},
		GPUNodeSelector:   "nvidia.com/gpu.present=true",
		UtilizationWindow: time.Hour,
	}
}

// Deps are the agent's connections to the outside world.
type Deps struct {
	NVML nvml.Interface
	Kube kubernetes.Interface // nil: no cluster (only for --once --dry-run)
	// PodResources is the kubelet's PodResources API, which says which
	// container holds each GPU; nil: GPUs are not attributed.
	PodResources PodResources
	Clock        clock.WithTicker // nil: the real clock
	BootID       func() (string, error)
	Registry     prometheus.Registerer // nil: metrics are kept but not exported
	Log          logr.Logger
}

// Agent watches one node's GPUs and reports on its Node. Run and Once are not
// safe to call concurrently; everything but the NVML event watch and the HTTP
// handlers runs on the caller's goroutine.
type Agent struct {
	cfg     Config
	lib     nvml.Interface
	kube    *kube
	clock   clock.WithTicker
	bootID  func() (string, error)
	log     logr.Logger
	metrics *Metrics

	podResources PodResources
	holders      map[string]Holder // reused every cycle
	usage        *usageHistory

	caller   *caller
	probe    *prober
	nvml     nvmlState
	known    map[string]int   // UUID -> index of every GPU seen
	baseline map[string][]int // UUID -> NVLinks seen up
	obs      Observation
	results  []Result
	state    State
	verdict  Verdict
	last     syncOutcome

	watchGen    int
	watchStop   context.CancelFunc
	watchErr    error
	xids        chan XIDEvent
	watchStatus chan watchState
	pollNow     chan struct{}
	xidEvents   map[xidKey]time.Time // when an Event was last recorded per GPU and XID
	pendingXIDs []XIDEvent           // XIDs not yet recorded as Events

	beat    atomic.Int64 // unix nanos of the loop's last turn, for /healthz
	once    bool         // Once: no background watch
	adopted bool         // the state on the node has been read
}

// nvmlState is whether NVML is loaded and what it said last.
type nvmlState struct {
	up            bool
	status        NVMLStatus
	triedAt       time.Time
	driverVersion string
}

type xidKey struct {
	uuid string
	xid  uint64
}

// New builds an agent.
func New(cfg Config, d Deps) (*Agent, error) {
	if d.NVML == nil {
		return nil, errors.New("nodeagent: no NVML interface")
	}
	if cfg.NodeName == "" && d.Kube != nil {
		return nil, errors.New("nodeagent: the node name is required (NODE_NAME from the downward API)")
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.BootID == nil {
		d.BootID = hostBootID
	}
	a := &Agent{
		cfg: cfg, lib: d.NVML, clock: d.Clock, bootID: d.BootID, log: d.Log,
		metrics:      NewMetrics(d.Registry),
		known:        map[string]int{},
		baseline:     map[string][]int{},
		xids:         make(chan XIDEvent, 64),
		watchStatus:  make(chan watchState, 1),
		pollNow:      make(chan struct{}, 1),
		xidEvents:    map[xidKey]time.Time{},
		podResources: d.PodResources,
		holders:      map[string]Holder{},
		usage:        newUsageHistory(cfg.UtilizationWindow),
	}
	a.caller = &caller{timeout: cfg.CallTimeout, onHang: func(c string) { a.metrics.nvmlHangs.WithLabelValues(c).Inc() }}
	a.probe = &prober{lib: d.NVML, c: a.caller}
	if d.Kube != nil {
		a.kube = &kube{client: d.Kube, name: cfg.NodeName, timeout: cfg.APITimeout,
			selector: cfg.GPUNodeSelector, clock: d.Clock, m: a.metrics}
	}
	return a, nil
}

// hostBootID reads the kernel's boot ID (the host's: containers share the kernel).
func hostBootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

// Run watches the GPUs and keeps the node's condition and taint up to date until
// ctx ends. It returns nil then; it does not return on NVML or API failures, which
// it reports and retries.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.adoptNode(ctx); err != nil {
		a.log.Error(err, "will retry")
	}
	a.poll(ctx, true)
	a.sync(ctx)
	fast := a.clock.NewTicker(a.cfg.PollInterval)
	slow := a.clock.NewTicker(a.cfg.SlowInterval)
	resync := a.clock.NewTicker(a.cfg.ResyncInterval)
	defer func() {
		fast.Stop()
		slow.Stop()
		resync.Stop()
		a.stopNVML(NVMLStatus{})
	}()
	for {
		a.beat.Store(a.clock.Now().UnixNano())
		select {
		case <-ctx.Done():
			return nil
		case <-fast.C():
			a.poll(ctx, false)
		case <-a.pollNow:
			a.poll(ctx, false)
		case <-slow.C():
			a.poll(ctx, true)
		case ev := <-a.xids:
			a.onXIDs(ev)
		case st := <-a.watchStatus:
			if st.gen != a.watchGen {
				continue
			}
			a.watchErr = st.err
			a.evaluate()
		case <-resync.C():
			a.refreshNode(ctx)
		}
		a.sync(ctx)
	}
}

// onXIDs evaluates ev and any other XIDs already waiting, at once.
func (a *Agent) onXIDs(ev XIDEvent) {
	events := []XIDEvent{ev}
	for more := true; more; {
		select {
		case e := <-a.xids:
			events = append(events, e)
		default:
			more = false
		}
	}
	for _, e := range events {
		rule := a.cfg.XIDs.Classify(e.XID)
		a.metrics.xid(e, rule.Class)
		a.log.Info("XID", "gpu", e.GPU, "uuid", e.UUID, "xid", e.XID, "class", rule.Class, "description", rule.Description)
	}
	a.obs.XIDs = events
	a.evaluate()
	a.obs.XIDs = nil
	if len(a.pendingXIDs) < cap(a.xids) {
		a.pendingXIDs = append(a.pendingXIDs, events...)
	}
}

// evaluate turns the current observation into results, state and verdict.
func (a *Agent) evaluate() {
	a.obs.Known = a.known
	a.obs.LinkBaseline = a.baseline
	a.obs.Expected = a.expectedGPUs()
	a.obs.ExpectedLinks = a.cfg.ExpectedNVLinks
	a.obs.Watch = a.watchErr
	a.results = Evaluate(a.obs, a.cfg.XIDs)
	a.state = Decide(a.state, a.results, a.evidence(), a.clock.Now(), a.cfg.Recovery)
	a.verdict = VerdictFor(a.state, a.results)
	a.metrics.observe(a.obs, a.results, a.state.Faults, a.verdict)
}

// evidence gathers what the agent knows of the node's life besides NVML.
func (a *Agent) evidence() Evidence {
	ev := Evidence{}
	if id, err := a.bootID(); err == nil {
		ev.BootID = id
	}
	if a.kube != nil {
		ev.ResetAckAt = resetAckAt(a.kube.node)
	}
	return ev
}

// expectedGPUs is the configured count, else the node's nvidia.com/gpu capacity.
func (a *Agent) expectedGPUs() int {
	if a.cfg.ExpectedGPUs > 0 || a.kube == nil || a.kube.node == nil {
		return a.cfg.ExpectedGPUs
	}
	q, ok := a.kube.node.Status.Capacity["nvidia.com/gpu"]
	if !ok {
		return 0
	}
	return int(q.Value())
}

// Healthy reports whether the loop has turned recently (for /healthz). NVML
// hanging does not stop the loop; only a bug would.
func (a *Agent) Healthy() error {
	last := a.beat.Load()
	if last == 0 {
		return errors.New("not started")
	}
	limit := 3*a.cfg.PollInterval + 2*a.cfg.CallTimeout + 2*syncBudget*a.cfg.APITimeout
	if age := a.clock.Since(time.Unix(0, last)); age > limit {
		return fmt.Errorf("the loop last turned %s ago", age.Round(time.Second))
	}
	return nil
}
