package nodeagent

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics. Per-GPU series carry the GPU's
// index and UUID (at most a handful per node).
type Metrics struct {
	gpuHealth    *prometheus.GaugeVec
	checkStatus  *prometheus.GaugeVec
	temperature  *prometheus.GaugeVec
	power        *prometheus.GaugeVec
	eccUncorr    *prometheus.GaugeVec
	remapped     *prometheus.GaugeVec
	xids         *prometheus.CounterVec
	nvmlUp       prometheus.Gauge
	nvmlHangs    *prometheus.CounterVec
	cycle        prometheus.Histogram
	api          *prometheus.CounterVec
	taints       *prometheus.CounterVec
	breakerOpen  prometheus.Gauge
	nodeHealthy  *prometheus.GaugeVec
	seenGPULabel map[[2]string]bool

	utilization        *prometheus.GaugeVec // by GPU and holder
	memoryUsed         *prometheus.GaugeVec // by GPU and holder
	memoryTotal        *prometheus.GaugeVec
	podResourcesErrors prometheus.Counter
	heldBy             map[[2]string]Holder // the holder labels each GPU's series carry now
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gpu := []string{"gpu", "uuid"}
	m := &Metrics{
		gpuHealth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_health",
			Help: "Worst result of the GPU's checks: 0 ok, 1 warning, 2 unknown, 3 fatal."}, gpu),
		checkStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_check_status",
			Help: "Result of one check on one GPU (gpu=\"node\" for node-level checks): 0 ok, 1 warning, 2 unknown, 3 fatal."},
			[]string{"gpu", "check"}),
		temperature: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_temperature_celsius",
			Help: "GPU core temperature."}, gpu),
		power: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_power_watts",
			Help: "GPU power draw."}, gpu),
		eccUncorr: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_ecc_uncorrected_volatile",
			Help: "Uncorrectable (double-bit) ECC errors since the last GPU reset."}, gpu),
		remapped: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_remapped_rows",
			Help: "Rows remapped, by the kind of error that caused it."}, []string{"gpu", "uuid", "kind"}),
		xids: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taugrid_gpu_xid_events_total",
			Help: "XID events by code and class."}, []string{"gpu", "uuid", "xid", "class"}),
		nvmlUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "taugrid_nodeagent_nvml_up",
			Help: "1 while NVML is loaded and answering."}),
		nvmlHangs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taugrid_nodeagent_nvml_call_timeouts_total",
			Help: "NVML calls abandoned after their deadline."}, []string{"call"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "taugrid_nodeagent_poll_seconds",
			Help: "Time to poll every GPU once.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
		api: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taugrid_nodeagent_api_requests_total",
			Help: "Kubernetes API requests by operation and result."}, []string{"op", "result"}),
		taints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "taugrid_nodeagent_taint_actions_total",
			Help: "Taint changes: added, removed, withheld (circuit breaker)."}, []string{"action"}),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "taugrid_nodeagent_circuit_breaker_open",
			Help: "1 while the circuit breaker withholds this node's taint."}),
		nodeHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_nodeagent_condition",
			Help: "1 for the TauGPUHealthy condition status the agent reports."}, []string{"status"}),
		seenGPULabel: map[[2]string]bool{},
		utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_utilization_ratio",
			Help: "Share of the last sample period in which a kernel ran on the GPU (NVML utilization.gpu), " +
				"with the namespace, pod and container it is allocated to (empty when none)."}, holderLabels),
		memoryUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_memory_used_bytes",
			Help: "GPU memory in use, with the namespace, pod and container the GPU is allocated to."}, holderLabels),
		memoryTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "taugrid_gpu_memory_total_bytes",
			Help: "GPU memory in all."}, gpu),
		podResourcesErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "taugrid_nodeagent_podresources_errors_total",
			Help: "Failed reads of the kubelet's PodResources API (GPUs are then shown unattributed)."}),
		heldBy: map[[2]string]Holder{},
	}
	if reg != nil {
		reg.MustRegister(m.gpuHealth, m.checkStatus, m.temperature, m.power, m.eccUncorr, m.remapped, m.xids,
			m.nvmlUp, m.nvmlHangs, m.cycle, m.api, m.taints, m.breakerOpen, m.nodeHealthy,
			m.utilization, m.memoryUsed, m.memoryTotal, m.podResourcesErrors)
	}
	return m
}

// observe records one cycle's samples, results, latched faults and verdict.
func (m *Metrics) observe(obs Observation, results []Result, faults []Fault, v Verdict) {
	m.nvmlUp.Set(boolGauge(obs.NVML.Reason == ""))
	present := map[[2]string]bool{}
	for _, s := range obs.GPUs {
		l := [2]string{strconv.Itoa(s.Index), s.UUID}
		present[l] = true
		setIf(m.temperature, l, s.TemperatureC.Err, float64(s.TemperatureC.Value))
		setIf(m.power, l, s.PowerMilliW.Err, float64(s.PowerMilliW.Value)/1000)
		setIf(m.eccUncorr, l, s.ECCUncorrected.Err, float64(s.ECCUncorrected.Value))
		if s.RowRemap.Err == nil {
			m.remapped.WithLabelValues(l[0], l[1], "correctable").Set(float64(s.RowRemap.Value.Correctable))
			m.remapped.WithLabelValues(l[0], l[1], "uncorrectable").Set(float64(s.RowRemap.Value.Uncorrectable))
		}
		m.usage(l, s, obs.Holders[s.UUID])
	}
	m.forgetGone(present)
	worst := map[[2]string]Severity{}
	for _, r := range results {
		gpu := "node"
		if r.GPU != NodeGPU {
			gpu = strconv.Itoa(r.GPU)
			l := [2]string{gpu, r.UUID}
			worst[l] = max(worst[l], r.Severity)
		}
		if !r.Event {
			m.checkStatus.WithLabelValues(gpu, string(r.Check)).Set(float64(r.Severity))
		}
	}
	for _, f := range faults {
		if f.GPU != NodeGPU {
			worst[[2]string{strconv.Itoa(f.GPU), f.UUID}] = SeverityFatal
		}
	}
	for l, sev := range worst {
		m.gpuHealth.WithLabelValues(l[0], l[1]).Set(float64(sev))
	}
	for _, st := range []string{"True", "False", "Unknown"} {
		m.nodeHealthy.WithLabelValues(st).Set(boolGauge(string(v.Status) == st))
	}
}

// forgetGone drops the readings of GPUs no longer present, so that a stale
// temperature is not mistaken for a live one.
func (m *Metrics) forgetGone(present map[[2]string]bool) {
	for l := range m.seenGPULabel {
		if !present[l] {
			for _, v := range []*prometheus.GaugeVec{m.temperature, m.power, m.eccUncorr, m.memoryTotal} {
				v.DeleteLabelValues(l[0], l[1])
			}
			m.forgetHolder(l)
			m.remapped.DeletePartialMatch(prometheus.Labels{"gpu": l[0], "uuid": l[1]})
			delete(m.seenGPULabel, l)
		}
	}
	for l := range present {
		m.seenGPULabel[l] = true
	}
}

func setIf(v *prometheus.GaugeVec, l [2]string, err error, x float64) {
	if err == nil {
		v.WithLabelValues(l[0], l[1]).Set(x)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// xid counts one XID event.
func (m *Metrics) xid(e XIDEvent, class XIDClass) {
	m.xids.WithLabelValues(strconv.Itoa(e.GPU), e.UUID, strconv.FormatUint(e.XID, 10), string(class)).Inc()
}

// holderLabels are the labels of per-GPU series attributed to a container.
var holderLabels = []string{"gpu", "uuid", "namespace", "pod", "container"}

// usage records a GPU's utilisation and memory under its holder. Each GPU has
// one series per metric at a time: when the holder changes, the old series is
// deleted, so the cardinality is the GPU count however many pods come and go.
func (m *Metrics) usage(l [2]string, s GPUSample, h Holder) {
	if old, ok := m.heldBy[l]; ok && old != h {
		m.forgetHolder(l)
	}
	m.heldBy[l] = h
	if s.Utilization.Err == nil {
		m.utilization.WithLabelValues(l[0], l[1], h.Namespace, h.Pod, h.Container).Set(float64(s.Utilization.Value) / 100)
	} else {
		m.utilization.DeleteLabelValues(l[0], l[1], h.Namespace, h.Pod, h.Container)
	}
	if s.Memory.Err == nil {
		m.memoryUsed.WithLabelValues(l[0], l[1], h.Namespace, h.Pod, h.Container).Set(float64(s.Memory.Value.Used))
		m.memoryTotal.WithLabelValues(l[0], l[1]).Set(float64(s.Memory.Value.Total))
	}
}

// forgetHolder deletes a GPU's series under the holder it had.
func (m *Metrics) forgetHolder(l [2]string) {
	if h, ok := m.heldBy[l]; ok {
		m.utilization.DeleteLabelValues(l[0], l[1], h.Namespace, h.Pod, h.Container)
		m.memoryUsed.DeleteLabelValues(l[0], l[1], h.Namespace, h.Pod, h.Container)
		delete(m.heldBy, l)
	}
}
