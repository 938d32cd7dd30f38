package nodeagent

import (
	"errors"
	"fmt"
	"time"
)

// Check names one health check. The names appear in condition messages, Events,
// metrics and the --once report.
type Check string

// The checks.
const (
	CheckNVML         Check = "nvml"          // the library loads, initialises and answers
	CheckGPUCount     Check = "gpu-count"     // every expected GPU is visible
	CheckGPULost      Check = "gpu-lost"      // NVML says the GPU is lost or needs a reset
	CheckXID          Check = "xid"           // XID errors, from the event set
	CheckXIDWatch     Check = "xid-watch"     // the XID event set itself works
	CheckECC          Check = "ecc"           // uncorrected (double-bit) volatile ECC errors
	CheckRetiredPages Check = "retired-pages" // page retirement pending (pre-Ampere)
	CheckRowRemap     Check = "row-remap"     // row remapping pending or failed (Ampere+)
	CheckNVLink       Check = "nvlink"        // NVLink links up
	CheckTemperature  Check = "temperature"   // below the slowdown threshold
	CheckClocks       Check = "clocks"        // no hardware or thermal clock slowdown
)

// Severity says how bad a result is. Higher is worse.
type Severity int

// Severities.
const (
	SeverityOK      Severity = iota
	SeverityWarning          // degraded: reported, never tainted
	SeverityUnknown          // the agent could not tell: reported, never tainted
	SeverityFatal            // the GPU must not get new work: latched, tainted
)

// String names the severity for reports and metrics.
func (s Severity) String() string {
	switch s {
	case SeverityOK:
		return "ok"
	case SeverityWarning:
		return "warning"
	case SeverityUnknown:
		return "unknown"
	case SeverityFatal:
		return "fatal"
	}
	return "invalid"
}

// MarshalText writes the name, so that reports say "fatal", not 3.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (s *Severity) UnmarshalText(b []byte) error {
	for v := SeverityOK; v <= SeverityFatal; v++ {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", b)
}

// NodeGPU is the GPU index Results about the node as a whole carry.
const NodeGPU = -1

// Result is the outcome of one check on one GPU (or the node, GPU == NodeGPU).
type Result struct {
	GPU      int      `json:"gpu"`
	UUID     string   `json:"uuid,omitempty"`
	Check    Check    `json:"check"`
	Severity Severity `json:"severity"`
	Reason   string   `json:"reason,omitempty"` // CamelCase; the condition and Event reason
	Message  string   `json:"message"`
	Action   Action   `json:"action,omitempty"`
	// Event marks a result from an event (an XID) rather than from a state NVML
	// still shows: only the latter can be seen to clear.
	Event bool `json:"event,omitempty"`
	// NA marks a check this GPU or driver does not offer (or not now, e.g.
	// remapped rows under MIG): it passed vacuously and is no evidence of anything.
	NA bool `json:"notApplicable,omitempty"`
}

// key identifies what a result is about, across cycles and reboots.
func (r Result) key() faultKey { return faultKey{UUID: r.UUID, GPU: r.GPU, Check: r.Check} }

// faultKey identifies a GPU (by UUID, by index when there is none) and a check.
type faultKey struct {
	UUID  string
	GPU   int
	Check Check
}

// Reading is one value read from NVML, or why it could not be read.
type Reading[T any] struct {
	Value T
	Err   error // nil, ErrNotSupported, or a *CallError
}

// ErrNotSupported marks a reading this GPU or driver does not offer: the check
// does not apply.
var ErrNotSupported = errors.New("not supported on this GPU or driver")

// GPUSample is what one poll read from one GPU. Fields left zero were not read
// this time (the slow fields between slow polls keep their last value).
type GPUSample struct {
	Index int
	UUID  string
	Name  string

	Lost          error // a call said ERROR_GPU_IS_LOST (nil if none did)
	ResetRequired error // a call said ERROR_RESET_REQUIRED

	ECCUncorrected Reading[uint64]
	RowRemap       Reading[RowRemap]
	RetiredPending Reading[bool]
	RetiredPages   Reading[int]
	NVLinks        Reading[[]LinkState]
	TemperatureC   Reading[uint32]
	SlowdownC      Reading[uint32]
	ClockReasons   Reading[uint64]
	PowerMilliW    Reading[uint32]
	// Utilization is the percent of the last sample period (1/6 s to 1 s,
	// by product) in which a kernel ran: nvmlDeviceGetUtilizationRates' gpu.
	Utilization Reading[uint32]
	Memory      Reading[MemoryUse]
}

// MemoryUse is the GPU's framebuffer memory in bytes.
type MemoryUse struct {
	Used, Total uint64
}

// RowRemap is nvmlDeviceGetRemappedRows' answer.
type RowRemap struct {
	Correctable, Uncorrectable int
	Pending, Failed            bool
}

// LinkState is one NVLink's state.
type LinkState struct {
	Link int
	Up   bool
}

// XIDEvent is one XID NVML delivered.
type XIDEvent struct {
	GPU  int
	UUID string
	XID  uint64
	At   time.Time
}

// NVMLStatus says whether NVML could be used at all.
type NVMLStatus struct {
	Reason  string // "" when usable; else ReasonNVMLUnavailable, ReasonNVMLError or ReasonNVMLUnresponsive
	Message string
}

// Observation is everything one cycle learned: the input of Evaluate.
type Observation struct {
	NVML  NVMLStatus
	Count Reading[int] // DeviceGetCount
	GPUs  []GPUSample  // the GPUs NVML shows now
	// Known maps UUIDs seen since the agent started (or persisted on the node)
	// to their index, so that a GPU that disappears can be named.
	Known map[string]int
	// Expected is how many GPUs the node should have (0: as many as Known).
	Expected int
	// LinkBaseline lists, per UUID, the NVLinks seen up before: one now down is a
	// fault. ExpectedLinks (if > 0) is the number of links each GPU should have up.
	LinkBaseline  map[string][]int
	ExpectedLinks int
	XIDs          []XIDEvent
	// Watch is the XID event set's state: nil when it works, else why not.
	Watch error
	// Holders maps GPU UUIDs to the containers the kubelet allocated them to
	// (nil without the PodResources API); HoldersErr says why it could not be read.
	Holders    map[string]Holder
	HoldersErr error
}

// Condition reasons the agent writes (besides the per-check ones in Result).
const (
	ReasonHealthy          = "GPUsHealthy"
	ReasonDegraded         = "GPUsDegraded"
	ReasonNVMLUnavailable  = "NVMLUnavailable"
	ReasonNVMLError        = "NVMLError"
	ReasonNVMLUnresponsive = "NVMLUnresponsive"
)
