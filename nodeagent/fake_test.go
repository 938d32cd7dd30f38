package nodeagent

import (
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// H200 figures the fake reports.
const (
	fakeLinks     = 18 // NVLinks per H200 SXM
	fakeSlowdownC = 90
	fakePowerMW   = 320_000
	fakeUtil      = 97 // percent: a training run keeping its GPUs busy
)

// fakeNVML is go-nvml's simulated 8x H200 server with the health calls filled in
// (the simulation stubs only inventory and MIG) and knobs to inject faults. The
// mock's funcs are set once, before the agent starts, and read the knobs under
// a lock: setting mock funcs while the agent calls them would race.
type fakeNVML struct {
	*server.Server
	all    []*server.Device // the 8 GPUs, present or not
	events chan nvml.EventData

	mu           sync.Mutex
	initRet      nvml.Return
	ecc          map[int]uint64
	remapPending map[int]bool
	remapFailed  map[int]bool
	gone         map[int]bool
	lost         map[int]bool
	linkDown     map[[2]int]bool
	temp         map[int]uint32
	clocks       map[int]uint64
	util         map[int]uint32 // percent busy; unset: fakeUtil
	memUsed      map[int]uint64
	hangs        map[string]chan struct{} // call name -> closed to release
}

func newFakeNVML(t testing.TB) *fakeNVML {
	t.Helper()
	f := &fakeNVML{
		Server: dgxh200.New(), events: make(chan nvml.EventData, 16), initRet: nvml.SUCCESS,
		ecc: map[int]uint64{}, remapPending: map[int]bool{}, remapFailed: map[int]bool{}, gone: map[int]bool{},
		lost: map[int]bool{}, linkDown: map[[2]int]bool{}, temp: map[int]uint32{}, clocks: map[int]uint64{},
		util: map[int]uint32{}, memUsed: map[int]uint64{}, hangs: map[string]chan struct{}{},
	}
	for _, d := range f.Devices {
		f.all = append(f.all, d.(*server.Device))
	}
	f.setServerFuncs()
	for i, d := range f.all {
		f.setDeviceFuncs(i, d)
	}
	t.Cleanup(f.releaseAll)
	return f
}

func (f *fakeNVML) setServerFuncs() {
	f.InitFunc = func() nvml.Return {
		f.maybeHang("Init")
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.initRet
	}
	f.DeviceGetCountFunc = func() (int, nvml.Return) {
		f.maybeHang("DeviceGetCount")
		return len(f.present()), nvml.SUCCESS
	}
	f.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		p := f.present()
		if i < 0 || i >= len(p) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return p[i], nvml.SUCCESS
	}
	f.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				select {
				case e := <-f.events:
					return e, nvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
}

// present lists the GPUs not gone, re-indexed as NVML would after a GPU leaves.
func (f *fakeNVML) present() []nvml.Device {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []nvml.Device
	for i, d := range f.all {
		if !f.gone[i] {
			out = append(out, d)
		}
	}
	return out
}

func (f *fakeNVML) setDeviceFuncs(i int, d *server.Device) {
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		f.maybeHang("GetTotalEccErrors")
		return knob(f, f.ecc, i)
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.lost[i] {
			return 0, 0, false, false, nvml.ERROR_GPU_IS_LOST
		}
		return 0, 0, f.remapPending[i], f.remapFailed[i], nvml.SUCCESS
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l >= fakeLinks {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.linkDown[[2]int{i, l}] {
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if t, ok := f.temp[i]; ok {
			return t, nvml.SUCCESS
		}
		return uint32(40 + i), nvml.SUCCESS
	}
	d.GetTemperatureThresholdFunc = func(nvml.TemperatureThresholds) (uint32, nvml.Return) { return fakeSlowdownC, nvml.SUCCESS }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return knob(f, f.clocks, i) }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return fakePowerMW, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.lost[i] {
			return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
		}
		u, ok := f.util[i]
		if !ok {
			u = fakeUtil
		}
		return nvml.Utilization{Gpu: u, Memory: u / 2}, nvml.SUCCESS
	}
	total := d.MemoryInfo.Total
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		used := f.memUsed[i]
		return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
}

// knob reads a per-GPU value, failing as a lost GPU does.
func knob[T any](f *fakeNVML, m map[int]T, i int) (T, nvml.Return) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost[i] {
		var zero T
		return zero, nvml.ERROR_GPU_IS_LOST
	}
	return m[i], nvml.SUCCESS
}

// set changes knobs under the lock.
func (f *fakeNVML) set(change func(f *fakeNVML)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// xid delivers an XID on GPU i (by its original index).
func (f *fakeNVML) xid(i int, code uint64) {
	f.events <- nvml.EventData{Device: f.all[i], EventType: nvml.EventTypeXidCriticalError, EventData: code,
		GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
}

// hang makes the named call block until release is called (or the test ends).
func (f *fakeNVML) hang(call string) (release func()) {
	ch := make(chan struct{})
	f.set(func(f *fakeNVML) { f.hangs[call] = ch })
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.hangs[call] == ch {
			delete(f.hangs, call)
			close(ch)
		}
	}
}

func (f *fakeNVML) maybeHang(call string) {
	f.mu.Lock()
	ch := f.hangs[call]
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (f *fakeNVML) releaseAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, ch := range f.hangs {
		close(ch)
		delete(f.hangs, name)
	}
}

func (f *fakeNVML) uuid(i int) string { return f.all[i].UUID }
