package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/test/controlplane"
)

// startControllers starts whichever of Kueue and KubeRay is not running, side by
// side, after installing (or re-pointing) the CRDs.
func (c *Cluster) startControllers(ctx context.Context, cl client.Client) error {
	var starts []func() error
	if _, ok := c.runningPID(controlplane.BinKueue); !ok {
		k, err := c.prepareKueue(ctx, cl)
		if err != nil {
			return err
		}
		starts = append(starts, func() error {
			return c.startDetached(ctx, controlplane.BinKueue, k.Args(), k.ReadyURL())
		})
	}
	if _, ok := c.runningPID(controlplane.BinKubeRay); !ok {
		r, err := controlplane.NewKubeRay(c.binary(controlplane.BinKubeRay), c.Kubeconfig())
		if err != nil {
			return err
		}
		starts = append(starts, func() error {
			return c.startDetached(ctx, controlplane.BinKubeRay, r.Args(), r.ReadyURL())
		})
	}
	errs := make([]error, len(starts))
	var wg sync.WaitGroup
	for i, start := range starts {
		wg.Go(func() { errs[i] = start() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareKueue writes Kueue's configuration, installs Kueue's and KubeRay's CRDs
// (Kueue's conversion pointed at the new process) and creates its certificate Secret.
func (c *Cluster) prepareKueue(ctx context.Context, cl client.Client) (*controlplane.Kueue, error) {
	k, err := controlplane.NewKueue(c.binary(controlplane.BinKueue), c.Kubeconfig(), c.kueueDir())
	if err != nil {
		return nil, err
	}
	crds, err := controlplane.StandardCRDs(k)
	if err != nil {
		return nil, err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	if err := controlplane.InstallCRDs(cfg, crds); err != nil {
		return nil, fmt.Errorf("installing the Kueue and KubeRay CRDs: %w", err)
	}
	return k, k.Prepare(ctx, cl)
}

// startDetached starts a controller in its own session, so that it outlives this
// command, records its pid, and waits until readyURL answers. A controller that
// does not get ready is killed.
func (c *Cluster) startDetached(ctx context.Context, name string, args []string, readyURL string) error {
	logPath := c.logPath(name)
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(c.binary(name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fail := func(err error) error {
		return &controlplane.ComponentError{Component: name, LogPath: logPath, Err: err}
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	if err := os.WriteFile(c.pidPath(name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return fail(err)
	}
	if err := waitReady(ctx, readyURL, exited); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		_ = os.Remove(c.pidPath(name))
		if errors.Is(err, errExited) {
			err = fmt.Errorf("exited while starting: %w", exitErr)
		}
		return fail(err)
	}
	return nil
}

var errExited = errors.New("exited")

// waitReady polls url until it answers 200 OK, the process exits, or
// controllerTimeout passes.
func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, controllerTimeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not ready at %s: %w", url, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runningPID returns the pid in name's pid file if that process still runs name's
// binary (a recycled pid is never taken for it).
func (c *Cluster) runningPID(name string) (int, bool) {
	data, err := os.ReadFile(c.pidPath(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !alive(pid) {
		return 0, false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	want, _ := filepath.EvalSymlinks(c.binary(name))
	if err != nil || exe != want {
		return 0, false
	}
	return pid, true
}

// stopDetached stops a controller's process group: SIGTERM, SIGKILL after 10 s.
func (c *Cluster) stopDetached(name string) error {
	pid, ok := c.runningPID(name)
	if ok {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	if err := os.Remove(c.pidPath(name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// processesUsing lists the live processes (not this one) whose command line
// mentions a path inside dir: every process of the cluster does, in its flags.
func processesUsing(dir string) []int {
	inside := []byte(filepath.Clean(dir) + string(filepath.Separator))
	var pids []int
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pid == os.Getpid() || !alive(pid) {
			continue
		}
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, inside) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// exitGrace is how long Down gives the cluster's processes to exit once
// told to: kwokctl signals its components and returns without waiting
// (make demo once found one still exiting and failed for it).
const exitGrace = 10 * time.Second

// exited waits up to grace for the processes using dir to exit and lists
// those still alive then.
func exited(dir string, grace time.Duration) []int {
	deadline := time.Now().Add(grace)
	left := processesUsing(dir)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		left = processesUsing(dir)
	}
	return left
}

func killAll(pids []int) {
	var wg sync.WaitGroup
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		wg.Go(func() {
			for i := 0; i < 50 && alive(pid); i++ {
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
}
