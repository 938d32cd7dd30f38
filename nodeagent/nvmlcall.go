package nodeagent

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// CallError is a failed NVML call: an error code, no answer within the deadline,
// or not made because an earlier call still hangs.
type CallError struct {
	Call    string
	GPU     int           // the GPU index the call was about, or NodeGPU
	Ret     nvml.Return   // when NVML answered
	Timeout time.Duration // when it did not answer in time
	Blocked string        // when an earlier call (named) still hangs
	Panic   any           // when the binding panicked
}

func (e *CallError) Error() string {
	switch {
	case e.Timeout > 0:
		return fmt.Sprintf("NVML %s: no answer within %s", e.Call, e.Timeout)
	case e.Blocked != "":
		return fmt.Sprintf("NVML %s: not called, %s", e.Call, e.Blocked)
	case e.Panic != nil:
		return fmt.Sprintf("NVML %s: panicked: %v", e.Call, e.Panic)
	}
	return fmt.Sprintf("NVML %s: %s", e.Call, e.Ret.Error())
}

// Is makes errors.Is(err, ErrNotSupported) true for the codes that mean the
// GPU or driver does not offer the call.
func (e *CallError) Is(target error) bool {
	return target == ErrNotSupported && e.Timeout == 0 && e.Blocked == "" && e.Panic == nil &&
		(e.Ret == nvml.ERROR_NOT_SUPPORTED || e.Ret == nvml.ERROR_FUNCTION_NOT_FOUND)
}

// unresponsive reports whether err says NVML did not answer (as opposed to
// answering with an error).
func unresponsive(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && (ce.Timeout > 0 || ce.Blocked != "")
}

// hasReturn reports whether err is NVML answering ret.
func hasReturn(err error, ret nvml.Return) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Timeout == 0 && ce.Blocked == "" && ce.Panic == nil && ce.Ret == ret
}

// caller runs NVML calls under a deadline. A call that passes its deadline is
// abandoned (a cgo call cannot be cancelled) and, until it returns, every other
// call fails at once: NVML serialises calls internally, so they would only pile
// up behind it, one goroutine each.
type caller struct {
	timeout time.Duration
	onHang  func(call string) // counts hangs in metrics; may be nil

	hung     atomic.Int32 // abandoned calls that have not returned yet
	mu       sync.Mutex
	hungCall string
	hungAt   time.Time
}

// errBlocked describes the hung call for calls refused because of it.
func (c *caller) errBlocked() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("NVML is unresponsive: %s has not returned since %s",
		c.hungCall, c.hungAt.UTC().Format(time.RFC3339))
}

// callState settles the race between a call returning and its deadline.
type callState struct{ settled atomic.Bool }

// call runs fn, an NVML call about GPU gpu (or NodeGPU), with the caller's deadline.
func call[T any](c *caller, name string, gpu int, fn func() (T, nvml.Return)) (T, error) {
	return callFor(c, name, gpu, c.timeout, fn)
}

// callFor runs fn with the given deadline.
func callFor[T any](c *caller, name string, gpu int, timeout time.Duration, fn func() (T, nvml.Return)) (T, error) {
	var zero T
	if c.hung.Load() > 0 {
		return zero, &CallError{Call: name, GPU: gpu, Blocked: c.errBlocked()}
	}
	type answer struct {
		v     T
		ret   nvml.Return
		panic any
	}
	done := make(chan answer, 1)
	st := &callState{}
	go func() {
		var a answer
		defer func() {
			if p := recover(); p != nil {
				a.panic = p
			}
			if !st.settled.CompareAndSwap(false, true) {
				c.hung.Add(-1) // abandoned earlier: it is no longer hanging
			}
			done <- a
		}()
		a.v, a.ret = fn()
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-done:
		return finish(name, gpu, a.v, a.ret, a.panic)
	case <-timer.C:
	}
	if !st.settled.CompareAndSwap(false, true) {
		a := <-done // it returned just as the deadline passed
		return finish(name, gpu, a.v, a.ret, a.panic)
	}
	c.mu.Lock()
	c.hungCall, c.hungAt = name, time.Now().Add(-timeout)
	if gpu != NodeGPU {
		c.hungCall = fmt.Sprintf("%s on GPU %d", name, gpu)
	}
	c.mu.Unlock()
	c.hung.Add(1)
	if c.onHang != nil {
		c.onHang(name)
	}
	return zero, &CallError{Call: name, GPU: gpu, Timeout: timeout}
}

func finish[T any](name string, gpu int, v T, ret nvml.Return, p any) (T, error) {
	if p != nil {
		var zero T
		return zero, &CallError{Call: name, GPU: gpu, Panic: p}
	}
	if ret != nvml.SUCCESS {
		return v, &CallError{Call: name, GPU: gpu, Ret: ret}
	}
	return v, nil
}

// call0 runs a call that returns only a status.
func call0(c *caller, name string, gpu int, fn func() nvml.Return) error {
	_, err := call(c, name, gpu, func() (struct{}, nvml.Return) { return struct{}{}, fn() })
	return err
}
