package nodeagent

import (
	"errors"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// gpuHandle is one GPU as the last inventory found it.
type gpuHandle struct {
	index int
	uuid  string
	name  string
	dev   nvml.Device
	err   error // the handle or its UUID could not be had: every reading fails with it

	links []int           // NVLinks that answered at the last slow poll
	na    map[string]bool // calls the GPU does not support; asked again at slow polls
	slow  slowReadings
}

// slowReadings are read every slow poll and reported until the next.
type slowReadings struct {
	slowdownC    Reading[uint32]
	retiredPages Reading[int]
	linksErr     error
}

// prober reads GPUs through NVML, every call under the caller's deadline.
type prober struct {
	lib  nvml.Interface
	c    *caller
	gpus []*gpuHandle
	// eventReasons: the driver has nvmlDeviceGetCurrentClocksEventReasons
	// (else the older throttle-reasons call is used).
	eventReasons bool
}

// count asks NVML how many GPUs it sees.
func (p *prober) count() Reading[int] {
	n, err := call(p.c, "DeviceGetCount", NodeGPU, p.lib.DeviceGetCount)
	return Reading[int]{Value: n, Err: err}
}

// inventory enumerates the GPUs, naming a GPU whose handle fails by the UUID
// last known at its index (uuidAt).
func (p *prober) inventory(n int, uuidAt func(int) string) {
	gpus := make([]*gpuHandle, 0, n)
	for i := range n {
		h := &gpuHandle{index: i, na: map[string]bool{}}
		h.dev, h.err = call(p.c, "DeviceGetHandleByIndex", i, func() (nvml.Device, nvml.Return) {
			return p.lib.DeviceGetHandleByIndex(i)
		})
		if h.err == nil {
			h.uuid, h.err = call(p.c, "GetUUID", i, h.dev.GetUUID)
		}
		if h.err != nil {
			h.uuid = uuidAt(i)
		} else {
			h.name, _ = call(p.c, "GetName", i, h.dev.GetName)
		}
		gpus = append(gpus, h)
	}
	p.gpus = gpus
}

// broken reports whether some handle failed at the last inventory.
func (p *prober) broken() bool {
	return slices.ContainsFunc(p.gpus, func(h *gpuHandle) bool { return h.err != nil })
}

// slowPoll reads what changes rarely or costs more: the slowdown threshold,
// retired pages, and which NVLinks exist. It also forgets which calls were
// unsupported, so that a driver upgrade is noticed.
func (p *prober) slowPoll() {
	for _, h := range p.gpus {
		if h.err != nil {
			continue
		}
		clear(h.na)
		h.slow.slowdownC = read(p, h, "GetTemperatureThreshold", func() (uint32, nvml.Return) {
			return h.dev.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
		})
		h.slow.retiredPages = p.retiredPages(h)
		h.links, h.slow.linksErr = p.discoverLinks(h)
	}
}

// retiredPages counts pages retired for double-bit and for repeated single-bit errors.
func (p *prober) retiredPages(h *gpuHandle) Reading[int] {
	total := 0
	for _, cause := range []nvml.PageRetirementCause{
		nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
	} {
		pages := read(p, h, "GetRetiredPages", func() ([]uint64, nvml.Return) { return h.dev.GetRetiredPages(cause) })
		if pages.Err != nil {
			return Reading[int]{Err: pages.Err}
		}
		total += len(pages.Value)
	}
	return Reading[int]{Value: total}
}

// discoverLinks lists the NVLinks that answer. Links past the GPU's count answer
// "invalid argument" or "not supported".
func (p *prober) discoverLinks(h *gpuHandle) ([]int, error) {
	var links []int
	for l := range nvml.NVLINK_MAX_LINKS {
		_, err := call(p.c, "GetNvLinkState", h.index, func() (nvml.EnableState, nvml.Return) { return h.dev.GetNvLinkState(l) })
		switch {
		case err == nil:
			links = append(links, l)
		case errors.Is(err, ErrNotSupported), hasReturn(err, nvml.ERROR_INVALID_ARGUMENT):
		default:
			return links, err
		}
	}
	return links, nil
}

// fastPoll reads the cheap counters of every GPU.
func (p *prober) fastPoll() []GPUSample {
	out := make([]GPUSample, len(p.gpus))
	for i, h := range p.gpus {
		out[i] = p.sample(h)
	}
	return out
}

// sample reads one GPU.
func (p *prober) sample(h *gpuHandle) GPUSample {
	s := GPUSample{Index: h.index, UUID: h.uuid, Name: h.name}
	if h.err != nil {
		return failedSample(s, h.err)
	}
	d := h.dev
	s.ECCUncorrected = read(p, h, "GetTotalEccErrors", func() (uint64, nvml.Return) {
		return d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	})
	s.RowRemap = read(p, h, "GetRemappedRows", func() (RowRemap, nvml.Return) {
		c, u, pending, failed, ret := d.GetRemappedRows()
		return RowRemap{Correctable: c, Uncorrectable: u, Pending: pending, Failed: failed}, ret
	})
	pending := read(p, h, "GetRetiredPagesPendingStatus", d.GetRetiredPagesPendingStatus)
	s.RetiredPending = Reading[bool]{Value: pending.Value == nvml.FEATURE_ENABLED, Err: pending.Err}
	s.RetiredPages = h.slow.retiredPages
	s.NVLinks = p.linkStates(h)
	s.TemperatureC = read(p, h, "GetTemperature", func() (uint32, nvml.Return) { return d.GetTemperature(nvml.TEMPERATURE_GPU) })
	s.SlowdownC = h.slow.slowdownC
	s.ClockReasons = p.clockReasons(h)
	s.PowerMilliW = read(p, h, "GetPowerUsage", d.GetPowerUsage)
	s.Utilization = read(p, h, "GetUtilizationRates", func() (uint32, nvml.Return) {
		u, ret := d.GetUtilizationRates()
		return u.Gpu, ret
	})
	s.Memory = read(p, h, "GetMemoryInfo", func() (MemoryUse, nvml.Return) {
		m, ret := d.GetMemoryInfo()
		return MemoryUse{Used: m.Used, Total: m.Total}, ret
	})
	s.Lost, s.ResetRequired = fatalReturns(s)
	return s
}

func (p *prober) clockReasons(h *gpuHandle) Reading[uint64] {
	if p.eventReasons {
		return read(p, h, "GetCurrentClocksEventReasons", h.dev.GetCurrentClocksEventReasons)
	}
	return read(p, h, "GetCurrentClocksThrottleReasons", h.dev.GetCurrentClocksThrottleReasons)
}

// linkStates reads the state of each NVLink found at the last slow poll.
func (p *prober) linkStates(h *gpuHandle) Reading[[]LinkState] {
	if h.slow.linksErr != nil {
		return Reading[[]LinkState]{Err: h.slow.linksErr}
	}
	states := make([]LinkState, 0, len(h.links))
	for _, l := range h.links {
		st, err := call(p.c, "GetNvLinkState", h.index, func() (nvml.EnableState, nvml.Return) { return h.dev.GetNvLinkState(l) })
		if err != nil && !hasReturn(err, nvml.ERROR_INVALID_ARGUMENT) {
			return Reading[[]LinkState]{Err: err}
		}
		states = append(states, LinkState{Link: l, Up: err == nil && st == nvml.FEATURE_ENABLED})
	}
	return Reading[[]LinkState]{Value: states}
}

// read makes one call about h, remembering calls h does not support so that fast
// polls stop asking.
func read[T any](p *prober, h *gpuHandle, name string, fn func() (T, nvml.Return)) Reading[T] {
	if h.na[name] {
		return Reading[T]{Err: ErrNotSupported}
	}
	v, err := call(p.c, name, h.index, fn)
	if errors.Is(err, ErrNotSupported) {
		h.na[name] = true
	}
	return Reading[T]{Value: v, Err: err}
}

// failedSample is a sample whose every reading failed with err.
func failedSample(s GPUSample, err error) GPUSample {
	s.ECCUncorrected.Err, s.RowRemap.Err, s.RetiredPending.Err, s.RetiredPages.Err = err, err, err, err
	s.NVLinks.Err, s.TemperatureC.Err, s.SlowdownC.Err, s.ClockReasons.Err, s.PowerMilliW.Err = err, err, err, err, err
	s.Utilization.Err, s.Memory.Err = err, err
	s.Lost, s.ResetRequired = fatalReturns(s)
	return s
}

// fatalReturns finds a reading that failed with "GPU is lost" or "reset required".
func fatalReturns(s GPUSample) (lost, reset error) {
	for _, err := range []error{s.ECCUncorrected.Err, s.RowRemap.Err, s.RetiredPending.Err, s.NVLinks.Err,
		s.TemperatureC.Err, s.ClockReasons.Err, s.PowerMilliW.Err, s.Utilization.Err, s.Memory.Err} {
		switch {
		case lost == nil && hasReturn(err, nvml.ERROR_GPU_IS_LOST):
			lost = err
		case reset == nil && hasReturn(err, nvml.ERROR_RESET_REQUIRED):
			reset = err
		}
	}
	return lost, reset
}
