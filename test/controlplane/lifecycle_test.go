package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childPIDs lists the live processes whose parent is ppid.
func childPIDs(ppid int) []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		pids = append(pids, pid)
	}
	return pids
}

// newChildren returns the children of this process not in before.
func newChildren(before []int) []int {
	var added []int
	for _, pid := range childPIDs(os.Getpid()) {
		if !slices.Contains(before, pid) {
			added = append(added, pid)
		}
	}
	return added
}

// fakeBinDir is a binary directory holding the real binaries except those in
// replace, which become the given scripts.
func fakeBinDir(t *testing.T, replace map[string]string) string {
	t.Helper()
	real, err := BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{BinEtcd, BinKubeAPIServer, BinKueue, BinKubeRay} {
		path := filepath.Join(dir, name)
		script, ok := replace[name]
		switch {
		case script == missing:
			continue
		case ok:
			err = os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755)
		default:
			err = os.Symlink(filepath.Join(real, name), path)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Scripts for fakeBinDir.
const (
	refuse  = `[ "$1" = --help ] && exit 0; echo "fake binary: refusing to start" >&2; exit 1`
	missing = "\x00" // no file at all
)

func TestAFailedStartNamesTheComponentAndLeavesNoProcessBehind(t *testing.T) {
	needsControlPlane(t)
	tests := map[string]struct {
		replace   map[string]string // binaries replaced by a script
		opts      Options
		component string // the component the error must name, with its log
		mention   string // or, without a log, what the error must say
	}{
		"etcd exits at start": {
			replace: map[string]string{BinEtcd: refuse}, component: BinEtcd,
		},
		"kube-apiserver exits at start": {
			replace: map[string]string{BinKubeAPIServer: refuse}, component: BinKubeAPIServer,
		},
		"kueue rejects its command line": {
			opts:      Options{Kueue: true, KubeRay: true, kueueArgs: []string{"--feature-gates=NoSuchGate=true"}},
			component: BinKueue,
		},
		"the kueue binary is missing": {
			replace: map[string]string{BinKueue: missing}, opts: Options{Kueue: true},
			mention: "kueue is missing",
		},
		"the kueue binary is not Kueue": {
			replace: map[string]string{BinKueue: "exit 0"}, opts: Options{Kueue: true},
			mention: "run make testbin",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.replace != nil {
				t.Setenv("TAU_TESTBIN", fakeBinDir(t, tc.replace))
			}
			before := childPIDs(os.Getpid())

			env, err := Start(context.Background(), tc.opts)
			if err == nil {
				env.Stop()
				t.Fatal("Start succeeded, want an error")
			}
			t.Logf("error: %v", err)
			checkBlame(t, err, tc.component, tc.mention)
			if left := newChildren(before); len(left) > 0 {
				t.Errorf("processes left running after the failed start: %v", left)
			}
		})
	}
}

// checkBlame checks that err names component and an existing log that says
// something, or (component empty) that it mentions mention. It removes the kept logs.
func checkBlame(t *testing.T, err error, component, mention string) {
	t.Helper()
	if component == "" {
		if !strings.Contains(err.Error(), mention) {
			t.Errorf("error %q does not mention %q", err, mention)
		}
		return
	}
	var ce *ComponentError
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T, want a *ComponentError naming %s", err, component)
	}
	if ce.Component != component {
		t.Errorf("error blames %q, want %q", ce.Component, component)
	}
	workDir := filepath.Dir(filepath.Dir(ce.LogPath))
	t.Cleanup(func() { os.RemoveAll(workDir) })
	if info, err := os.Stat(ce.LogPath); err != nil || info.Size() == 0 {
		t.Errorf("log %s named by the error is missing or empty (%v)", ce.LogPath, err)
	}
	// Only the logs are kept.
	entries, _ := os.ReadDir(workDir)
	for _, e := range entries {
		if e.Name() != "logs" {
			t.Errorf("%s left in %s after the failed start", e.Name(), workDir)
		}
	}
}

// helperEnv, when set, makes the test binary a helper that starts a control plane,
// reports its children to the file the variable names, and waits to be killed.
const helperEnv = "TAU_CONTROLPLANE_HELPER"

// helperReport is what the helper writes once its control plane is up.
type helperReport struct {
	PIDs []int  // the processes it started
	Dir  string // its work directory
}

func runHelper() int {
	env, err := Start(context.Background(), Options{Kueue: true, KubeRay: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	report, _ := json.Marshal(helperReport{PIDs: childPIDs(os.Getpid()), Dir: filepath.Dir(env.LogDir)})
	tmp := os.Getenv(helperEnv) + ".tmp"
	if err := os.WriteFile(tmp, report, 0o644); err != nil {
		return 1
	}
	os.Rename(tmp, os.Getenv(helperEnv))
	select {} // until killed
}

func TestATestProcessKilledMidRunLeavesNoProcessBehind(t *testing.T) {
	needsControlPlane(t)
	reportPath := filepath.Join(t.TempDir(), "report.json")
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+reportPath)
	helper.Stderr = os.Stderr
	helper.SysProcAttr = childAttr()
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()

	var report helperReport
	eventually(t, 2*time.Minute, func() (bool, string) {
		select {
		case err := <-exited:
			t.Fatalf("helper exited before its control plane was up: %v", err)
		default:
		}
		data, err := os.ReadFile(reportPath)
		return err == nil && json.Unmarshal(data, &report) == nil, "helper's control plane not up"
	})
	if len(report.PIDs) != 4 {
		t.Errorf("helper runs %d processes (%v), want 4: etcd, kube-apiserver, kueue, kuberay-operator", len(report.PIDs), report.PIDs)
	}

	_ = helper.Process.Signal(syscall.SIGKILL)
	<-exited
	eventually(t, 10*time.Second, func() (bool, string) {
		var running []int
		for _, pid := range report.PIDs {
			if alive(pid) {
				running = append(running, pid)
			}
		}
		return len(running) == 0, fmt.Sprintf("processes of the killed helper still running: %v", running)
	})

	sweepStale()
	if _, err := os.Stat(report.Dir); !os.IsNotExist(err) {
		t.Errorf("the killed helper's directory %s survived the next sweep (%v)", report.Dir, err)
	}
}
