package nodeagent

import (
	"context"
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// startNVML loads and initialises NVML, takes the inventory and starts the XID
// watch. On failure NVML is left down with a status saying why.
func (a *Agent) startNVML(ctx context.Context) {
	a.nvml.triedAt = a.clock.Now()
	if err := call0(a.caller, "Init", NodeGPU, a.lib.Init); err != nil {
		a.nvml.status = initStatus(err)
		a.log.Info("NVML not usable; GPUs are not monitored", "reason", a.nvml.status.Reason, "message", a.nvml.status.Message)
		return
	}
	a.nvml.up, a.nvml.status = true, NVMLStatus{}
	a.nvml.driverVersion, _ = call(a.caller, "SystemGetDriverVersion", NodeGPU, a.lib.SystemGetDriverVersion)
	a.probe.eventReasons = a.hasSymbol("nvmlDeviceGetCurrentClocksEventReasons")
	a.log.Info("NVML loaded", "driver", a.nvml.driverVersion)
}

// hasSymbol reports whether the driver's NVML has a function. go-nvml binds
// lazily, and calling a function an older driver lacks would crash the process.
func (a *Agent) hasSymbol(name string) bool {
	_, err := call(a.caller, "LookupSymbol", NodeGPU, func() (struct{}, nvml.Return) {
		if a.lib.Extensions().LookupSymbol(name) != nil {
			return struct{}{}, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return struct{}{}, nvml.SUCCESS
	})
	return err == nil
}

// initStatus explains why NVML could not be initialised.
func initStatus(err error) NVMLStatus {
	switch {
	case unresponsive(err):
		return NVMLStatus{Reason: ReasonNVMLUnresponsive, Message: err.Error()}
	case hasReturn(err, nvml.ERROR_LIBRARY_NOT_FOUND):
		return NVMLStatus{Reason: ReasonNVMLUnavailable, Message: "NVML library (libnvidia-ml.so.1) not found: " +
			"the NVIDIA driver is not installed, or not mounted into the agent (nvidia runtime class)"}
	case hasReturn(err, nvml.ERROR_DRIVER_NOT_LOADED):
		return NVMLStatus{Reason: ReasonNVMLUnavailable, Message: "the NVIDIA kernel driver is not loaded"}
	}
	return NVMLStatus{Reason: ReasonNVMLError, Message: "NVML failed to initialise: " + err.Error()}
}

// stopNVML stops the watch and shuts NVML down, recording why.
func (a *Agent) stopNVML(why NVMLStatus) {
	a.stopWatch()
	if a.nvml.up {
		_ = call0(a.caller, "Shutdown", NodeGPU, a.lib.Shutdown)
	}
	a.nvml.up, a.nvml.status = false, why
	a.probe.gpus = nil
}

// lostLibrary: NVML answered in a way that means it must be initialised again.
func lostLibrary(err error) bool {
	return hasReturn(err, nvml.ERROR_UNINITIALIZED) || hasReturn(err, nvml.ERROR_DRIVER_NOT_LOADED) ||
		hasReturn(err, nvml.ERROR_LIB_RM_VERSION_MISMATCH)
}

// poll reads the GPUs (with slow, the heavier readings too) and evaluates.
func (a *Agent) poll(ctx context.Context, slow bool) {
	start := a.clock.Now()
	defer func() { a.metrics.cycle.Observe(a.clock.Since(start).Seconds()) }()
	if !a.nvml.up && (a.nvml.triedAt.IsZero() || a.clock.Since(a.nvml.triedAt) >= a.cfg.NVMLRetryInterval) {
		a.startNVML(ctx)
		slow = true
	}
	a.obs = Observation{NVML: a.nvml.status}
	if a.nvml.up {
		a.readGPUs(ctx, slow)
		a.attribute(ctx)
		a.usage.add(a.clock.Now(), a.obs.GPUs, a.obs.Holders)
	}
	a.evaluate()
}

// readGPUs fills the observation from NVML.
func (a *Agent) readGPUs(ctx context.Context, slow bool) {
	count := a.probe.count()
	if lostLibrary(count.Err) {
		a.stopNVML(NVMLStatus{Reason: ReasonNVMLUnavailable, Message: "NVML lost the driver: " + count.Err.Error()})
		a.obs.NVML = a.nvml.status
		return
	}
	a.obs.Count = count
	if count.Err != nil {
		return
	}
	if slow || count.Value != len(a.probe.gpus) || a.probe.broken() {
		before := uuids(a.probe.gpus)
		a.probe.inventory(count.Value, a.uuidAt)
		a.probe.slowPoll()
		if !a.once && (!slices.Equal(before, uuids(a.probe.gpus)) || a.watchStop == nil) {
			a.startWatch(ctx)
		}
	}
	a.obs.GPUs = a.probe.fastPoll()
	a.learn(a.obs.GPUs)
}

func uuids(gpus []*gpuHandle) []string {
	out := make([]string, len(gpus))
	for i, h := range gpus {
		out[i] = fmt.Sprintf("%d:%s:%v", h.index, h.uuid, h.err == nil)
	}
	return out
}

// uuidAt is the UUID last seen at index i ("" if none).
func (a *Agent) uuidAt(i int) string {
	for uuid, idx := range a.known {
		if idx == i {
			return uuid
		}
	}
	return ""
}

// learn remembers the GPUs seen and the NVLinks seen up.
func (a *Agent) learn(samples []GPUSample) {
	for _, s := range samples {
		if s.UUID == "" || s.Lost != nil {
			continue
		}
		a.known[s.UUID] = s.Index
		if s.NVLinks.Err != nil {
			continue
		}
		for _, l := range s.NVLinks.Value {
			if l.Up && !slices.Contains(a.baseline[s.UUID], l.Link) {
				a.baseline[s.UUID] = append(a.baseline[s.UUID], l.Link)
				slices.Sort(a.baseline[s.UUID])
			}
		}
	}
}

// startWatch (re)starts the XID watch over the current inventory.
func (a *Agent) startWatch(ctx context.Context) {
	a.stopWatch()
	a.watchGen++
	wctx, cancel := context.WithCancel(ctx)
	a.watchStop = cancel
	w := &watch{lib: a.lib, c: a.caller, clock: a.clock, wait: a.cfg.EventWait, gpus: a.probe.gpus,
		gen: a.watchGen, xids: a.xids, status: a.watchStatus, pollNow: a.pollNow}
	go w.run(wctx)
}

func (a *Agent) stopWatch() {
	if a.watchStop != nil {
		a.watchStop()
		a.watchStop = nil
	}
	a.watchErr = nil
}
