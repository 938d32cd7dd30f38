package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// workDirPrefix names each control plane's directory under $TMPDIR.
const workDirPrefix = "taugrid-controlplane-"

// ownerFile holds the pid of the process that owns a work directory.
const ownerFile = "owner.pid"

func (e *Env) writeOwner() error {
	return os.WriteFile(filepath.Join(e.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
}

// sweepStale removes the work directories of test processes that died without
// cleaning up (their children died with them, by Pdeathsig).
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being created
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err == nil && !alive(pid) {
			_ = os.RemoveAll(dir)
		}
	}
}

// alive reports whether a process exists (a zombie counts as gone).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: ask the kernel
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// wrapper is a script envtest runs instead of etcd or kube-apiserver. It records
// the pid and execs the real binary under setpriv --pdeathsig, so the process dies
// with the test. The pid identifies the process group to kill if envtest leaves
// it running.
type wrapper struct {
	name    string
	path    string   // the script
	binary  string   // the real executable
	pidFile string   // the pid of the last process the script became
	logPath string   // where the process logs
	log     *os.File // open on logPath, handed to envtest
}

func (e *Env) newWrapper(binDir, name string) (*wrapper, error) {
	dir := filepath.Join(e.dir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	binary, err := filepath.EvalSymlinks(filepath.Join(binDir, name)) // as /proc/PID/exe shows it
	if err != nil {
		return nil, err
	}
	w := &wrapper{
		name:    name,
		path:    filepath.Join(dir, name),
		binary:  binary,
		pidFile: filepath.Join(dir, name+".pid"),
		logPath: filepath.Join(e.LogDir, name+".log"),
	}
	exec := append(append([]string{}, deathSigPrefix...), w.binary)
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s\nexec %s \"$@\"\n", shellQuote(w.pidFile), shellJoin(exec))
	if err := os.WriteFile(w.path, []byte(script), 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w.log = log
	e.wrappers = append(e.wrappers, w)
	return w, nil
}

// pid returns the process the wrapper last became, if it is still running the
// real binary (so that a recycled pid is never signalled).
func (w *wrapper) pid() (int, bool) {
	data, err := os.ReadFile(w.pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !alive(pid) {
		return 0, false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return pid, err == nil && exe == w.binary
}

// kill kills the wrapper's process group if it still runs.
func (w *wrapper) kill() {
	if pid, ok := w.pid(); ok {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}
