package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/utils/clock"
)

// watchedEvents are the NVML events the watch registers for (where supported).
const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

// Backoff between attempts to set the event watch up again.
const (
	watchBackoffMin = time.Second
	watchBackoffMax = 30 * time.Second
)

// watch waits on an NVML event set for XIDs, for one inventory of GPUs.
type watch struct {
	lib   nvml.Interface
	c     *caller
	clock clock.Clock
	wait  time.Duration // how long each EventSet.Wait blocks
	gpus  []*gpuHandle

	gen     int // which watch this is: the agent ignores the states of old ones
	xids    chan<- XIDEvent
	status  chan watchState
	pollNow chan<- struct{} // a double-bit error or a lost GPU: poll the counters now
}

// watchState is a watch's state: Err nil while it watches.
type watchState struct {
	gen int
	err error
}

// run keeps the watch going until ctx ends, setting it up again after failures.
func (w *watch) run(ctx context.Context) {
	backoff := watchBackoffMin
	for ctx.Err() == nil {
		err := w.watchOnce(ctx, false)
		if ctx.Err() != nil {
			return
		}
		w.report(ctx, err)
		select {
		case <-ctx.Done():
			return
		case <-w.clock.After(backoff):
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// watchOnce sets up an event set and waits on it until ctx ends or Wait fails;
// with drain, also until the first Wait that times out (for --once).
func (w *watch) watchOnce(ctx context.Context, drain bool) error {
	set, err := call(w.c, "EventSetCreate", NodeGPU, w.lib.EventSetCreate)
	if err != nil {
		return err
	}
	defer func() { _ = call0(w.c, "EventSet.Free", NodeGPU, set.Free) }()
	byDev, err := w.register(set)
	if err != nil {
		return err
	}
	w.report(ctx, nil)
	for ctx.Err() == nil {
		data, err := callFor(w.c, "EventSet.Wait", NodeGPU, w.wait+w.c.timeout, func() (nvml.EventData, nvml.Return) {
			return set.Wait(uint32(w.wait.Milliseconds()))
		})
		switch {
		case err == nil:
			w.deliver(ctx, data, byDev)
		case hasReturn(err, nvml.ERROR_TIMEOUT):
			if drain {
				return nil
			}
		default:
			if hasReturn(err, nvml.ERROR_GPU_IS_LOST) {
				w.poke()
			}
			return err
		}
	}
	return nil
}

// register registers every GPU that supports XID events with set.
func (w *watch) register(set nvml.EventSet) (map[nvml.Device]*gpuHandle, error) {
	byDev := map[nvml.Device]*gpuHandle{}
	for _, h := range w.gpus {
		if h.err != nil {
			continue
		}
		supported, err := call(w.c, "GetSupportedEventTypes", h.index, h.dev.GetSupportedEventTypes)
		if errors.Is(err, ErrNotSupported) || (err == nil && supported&nvml.EventTypeXidCriticalError == 0) {
			continue
		}
		if err != nil {
			return nil, err
		}
		mask := supported & watchedEvents
		if err := call0(w.c, "RegisterEvents", h.index, func() nvml.Return { return h.dev.RegisterEvents(mask, set) }); err != nil {
			return nil, err
		}
		byDev[h.dev] = h
	}
	if len(byDev) == 0 && len(w.gpus) > 0 {
		return nil, fmt.Errorf("none of the %d GPUs delivers XID events", len(w.gpus))
	}
	return byDev, nil
}

// deliver passes an event on: XIDs to the agent, double-bit errors as a poll.
func (w *watch) deliver(ctx context.Context, data nvml.EventData, byDev map[nvml.Device]*gpuHandle) {
	if data.EventType&nvml.EventTypeDoubleBitEccError != 0 {
		w.poke()
	}
	if data.EventType&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	ev := XIDEvent{GPU: NodeGPU, XID: data.EventData, At: w.clock.Now()}
	if h := w.owner(data.Device, byDev); h != nil {
		ev.GPU, ev.UUID = h.index, h.uuid
	}
	select {
	case w.xids <- ev:
	case <-ctx.Done():
	}
}

// owner finds the GPU an event came from: by handle, else by UUID.
func (w *watch) owner(dev nvml.Device, byDev map[nvml.Device]*gpuHandle) *gpuHandle {
	if dev == nil {
		return nil
	}
	if h, ok := byDev[dev]; ok {
		return h
	}
	uuid, err := call(w.c, "GetUUID", NodeGPU, dev.GetUUID)
	if err != nil {
		return nil
	}
	for _, h := range byDev {
		if h.uuid == uuid {
			return h
		}
	}
	return nil
}

func (w *watch) poke() {
	select {
	case w.pollNow <- struct{}{}:
	default:
	}
}

// report sends the watch's state, replacing a state not yet read.
func (w *watch) report(ctx context.Context, err error) {
	for {
		select {
		case w.status <- watchState{gen: w.gen, err: err}:
			return
		case <-ctx.Done():
			return
		default:
		}
		select {
		case <-w.status:
		default:
		}
	}
}
