package cluster

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestDownWaitsForTheClusterToExitBeforeCallingAnythingLeft: kwokctl
// signals the cluster's processes and returns at once; a process that
// exits a moment later is not left over, one still alive after the grace
// is.
func TestDownWaitsForTheClusterToExitBeforeCallingAnythingLeft(t *testing.T) {
	dir := t.TempDir()
	start := func(secs string) *exec.Cmd {
		t.Helper()
		// Its command line names a path inside dir, as the cluster's do.
		cmd := exec.Command("sh", "-c", "sleep "+secs, filepath.Join(dir, "component"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = cmd.Wait() }()
		return cmd
	}
	start("0.5")
	if left := exited(dir, 10*time.Second); len(left) != 0 {
		t.Errorf("a process exiting half a second later was left over: %v", left)
	}
	slow := start("30")
	t.Cleanup(func() { _ = slow.Process.Kill() })
	if left := exited(dir, 300*time.Millisecond); !slices.Contains(left, slow.Process.Pid) {
		t.Errorf("a process alive after the grace was not named: %v, want %d", left, slow.Process.Pid)
	}
}
