package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ComponentError is a failure of one control-plane component. It names the
// component and the log file that says why.
type ComponentError struct {
	Component string // e.g. "kueue", "etcd"
	LogPath   string // empty when the component never got as far as logging
	Err       error
}

func (e *ComponentError) Error() string {
	if e.LogPath == "" {
		return fmt.Sprintf("%s: %v", e.Component, e.Err)
	}
	return fmt.Sprintf("%s: %v (log: %s)%s", e.Component, e.Err, e.LogPath, logTail(e.LogPath, 8))
}

func (e *ComponentError) Unwrap() error { return e.Err }

// child is a process the harness started and owns.
type child struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
	exitErr error         // valid once done is closed
}

// startChild starts path with args in its own process group, with stdout and stderr
// appended to logPath.
func startChild(name, logPath, path string, args ...string) (*child, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, &ComponentError{Component: name, Err: err}
	}
	defer log.Close() // the child has its own copy

	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, &ComponentError{Component: name, LogPath: logPath, Err: err}
	}
	c := &child{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.exitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// pid is the child's process id, which is also its process group id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// errorf wraps a failure of this child with its name and log.
func (c *child) errorf(format string, args ...any) error {
	return &ComponentError{Component: c.name, LogPath: c.logPath, Err: fmt.Errorf(format, args...)}
}

// waitReady polls url until it answers 200 OK. It fails early, with the exit
// status, if the process exits first.
func (c *child) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if httpOK(ctx, url) {
			return c.stillRunning()
		}
		select {
		case <-c.done:
			return c.errorf("exited while starting: %v", exitStatus(c.exitErr))
		case <-ctx.Done():
			return c.errorf("not ready at %s after %s", url, timeout)
		case <-tick.C:
		}
	}
}

// readyGrace is how long a component must outlive its first ready answer.
// Ports are picked free and bound later, so the answer can come from
// another test package's component on the same port while this one exits
// (a flag it refuses, the port taken): alive after the grace, it is ours.
const readyGrace = 300 * time.Millisecond

// stillRunning fails if the child exits within readyGrace.
func (c *child) stillRunning() error {
	select {
	case <-c.done:
		return c.errorf("exited while starting: %v", exitStatus(c.exitErr))
	case <-time.After(readyGrace):
		return nil
	}
}

// kill kills the child's whole process group and returns once the child has been
// reaped.
func (c *child) kill() {
	_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
	<-c.done
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// probeClient asks components whether they are ready. kube-scheduler and
// kube-controller-manager answer only over TLS, with a certificate they make
// themselves on start; on loopback, in a test, it is not checked.
var probeClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback probes of the test's own components

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// freePort asks the kernel for a loopback port nobody listens on. Another process
// may take it before ours binds it; the components then fail with "address already
// in use", which Start retries.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePorts asks the kernel for n distinct loopback ports nobody listens on,
// holding each open until all are picked so none is handed out twice. As
// with freePort, another process may take one before its user binds it.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTail returns the last n lines of a log, indented, to put the cause of a failure
// in the error itself.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b bytes.Buffer
	b.WriteString("; last lines:")
	for _, l := range lines {
		if len(l) > 400 {
			l = l[:400] + "…"
		}
		b.WriteString("\n    " + l)
	}
	return b.String()
}

// addrInUse reports whether a component failed because a port was taken.
func addrInUse(err error) bool {
	var ce *ComponentError
	if !errors.As(err, &ce) || ce.LogPath == "" {
		return false
	}
	data, _ := os.ReadFile(ce.LogPath)
	return bytes.Contains(data, []byte("address already in use"))
}
