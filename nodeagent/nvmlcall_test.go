package nodeagent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestCallWithADeadline: a call that hangs is abandoned at its deadline; later
// calls fail at once instead of piling up behind it; all is well once it returns.
func TestCallWithADeadline(t *testing.T) {
	hangs := 0
	c := &caller{timeout: 50 * time.Millisecond, onHang: func(string) { hangs++ }}
	release := make(chan struct{})
	start := time.Now()
	_, err := call(c, "GetTotalEccErrors", 3, func() (uint64, nvml.Return) {
		<-release
		return 0, nvml.SUCCESS
	})
	var ce *CallError
	if !errors.As(err, &ce) || ce.Timeout != 50*time.Millisecond || !unresponsive(err) {
		t.Fatalf("hung call: err = %v, want a timeout", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the hung call took %s to give up", took)
	}
	if err.Error() != "NVML GetTotalEccErrors: no answer within 50ms" {
		t.Errorf("message %q", err)
	}

	called := false
	_, err = call(c, "GetTemperature", 1, func() (uint32, nvml.Return) { called = true; return 40, nvml.SUCCESS })
	if called || !unresponsive(err) || !strings.Contains(err.Error(), "GetTotalEccErrors on GPU 3 has not returned since") {
		t.Fatalf("call behind a hung one: called=%v err=%v, want it refused naming the hung call", called, err)
	}

	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for c.hung.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	v, err := call(c, "GetTemperature", 1, func() (uint32, nvml.Return) { return 40, nvml.SUCCESS })
	if err != nil || v != 40 {
		t.Fatalf("after the hung call returned: %v, %v; want 40, nil", v, err)
	}
	if hangs != 1 {
		t.Errorf("hangs counted: %d, want 1", hangs)
	}
}

func TestCallErrors(t *testing.T) {
	c := &caller{timeout: time.Second}
	cases := map[string]struct {
		fn            func() (int, nvml.Return)
		notSupported  bool
		lost          bool
		wantSubstring string
	}{
		"not supported is told apart": {
			fn: func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }, notSupported: true, wantSubstring: "ERROR_NOT_SUPPORTED"},
		"a missing function is not supported": {
			fn: func() (int, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }, notSupported: true, wantSubstring: "ERROR_FUNCTION_NOT_FOUND"},
		"a lost GPU is an answer, not a hang": {
			fn: func() (int, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }, lost: true, wantSubstring: "ERROR_GPU_IS_LOST"},
		"a panicking binding is an error, not a crash": {
			fn: func() (int, nvml.Return) { panic("method is nil but Device.GetFoo was just called") }, wantSubstring: "panicked"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := call(c, "X", NodeGPU, tc.fn)
			if err == nil || !strings.Contains(err.Error(), tc.wantSubstring) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantSubstring)
			}
			if errors.Is(err, ErrNotSupported) != tc.notSupported {
				t.Errorf("errors.Is(err, ErrNotSupported) = %v, want %v", !tc.notSupported, tc.notSupported)
			}
			if hasReturn(err, nvml.ERROR_GPU_IS_LOST) != tc.lost || unresponsive(err) {
				t.Errorf("lost = %v, unresponsive = %v", hasReturn(err, nvml.ERROR_GPU_IS_LOST), unresponsive(err))
			}
		})
	}
}
