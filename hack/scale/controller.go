package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taugrid/taugrid/test/controlplane"
)

// controller is the real tau-controller binary, run as a child process so
// that its memory and CPU are its own.
type controller struct {
	cmd                            *exec.Cmd
	log                            string
	metricsURL, pprofURL, readyURL string
	clockTicks                     float64       // USER_HZ, the unit of /proc/<pid>/stat's CPU times
	cgroup                         *memoryCgroup // nil: none
}

// startController builds cmd/tau-controller and starts it on the harness's
// cluster, with its profiling endpoints on loopback.
func (h *harness) startController(ctx context.Context) error {
	bin := filepath.Join(h.dir, "tau-controller")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tau-controller")
	build.Dir, build.Stdout, build.Stderr = h.root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building tau-controller: %w", err)
	}
	ports, err := controlplane.FreePorts(7)
	if err != nil {
		return err
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	c := &controller{log: filepath.Join(h.dir, "tau-controller.log"), metricsURL: "http://" + addr(0) + "/metrics",
		pprofURL: "http://" + addr(6) + "/debug/pprof/", readyURL: "http://" + addr(1) + "/readyz", clockTicks: 100}
	log, err := os.Create(c.log)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig", h.env.Kubeconfig,
		"--metrics-bind-address", addr(0), "--metrics-secure=false", // scraped by the harness on loopback
		"--health-probe-bind-address", addr(1),
		"--webhook-bind-address", addr(2),
		"--source-bind-address", addr(3),
		"--source-url", "http://" + addr(3),
		"--api-bind-address", addr(4),
		"--evidence-bind-address", addr(5),
		"--evidence-url", "http://" + addr(5),
		"--evidence-dir", filepath.Join(h.dir, "evidence"),
		"--pprof-bind-address", addr(6),
		"--cache-dir", filepath.Join(h.dir, "cache"),
		"--namespace", "default"}
	args = append(args, h.cfg.ctrlArgs...)
	c.cmd = exec.Command(bin, args...)
	if h.cfg.memLimit > 0 {
		// The controller joins its cgroup before it starts (sh writes its
		// own pid, then execs it), so it reads its limit as under the chart.
		if c.cgroup, err = newMemoryCgroup(fmt.Sprintf("tau-scale-%d", os.Getpid()), h.cfg.memLimit); err != nil {
			return err
		}
		c.cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, c.cgroup.procs, bin}, args...)...)
	}
	c.cmd.Stdout, c.cmd.Stderr = log, log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return err
	}
	h.ctrl = c
	return waitFor(ctx, 2*time.Minute, "tau-controller ready", func() (bool, error) {
		resp, err := http.Get(c.readyURL)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet: ask again
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// stop ends the controller: SIGTERM, then SIGKILL after 10 s.
func (c *controller) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	c.cgroup.remove()
}

// usage is the controller's resident memory (now and peak) and CPU time.
type usage struct {
	rssMiB, peakMiB float64
	cpu             time.Duration
}

// usage reads /proc: VmRSS and VmHWM from status, utime+stime from stat.
func (c *controller) usage() (usage, error) {
	pid := c.cmd.Process.Pid
	var u usage
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			u.rssMiB = kb / 1024
		case "VmHWM":
			u.peakMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	_, u.cpu, _ = parseStat(string(stat), c.clockTicks)
	return u, nil
}

// profile saves the controller's CPU profile over d (its heap when d is
// 0, its goroutines when d is negative) to file.
func (c *controller) profile(file string, d time.Duration) error {
	url := c.pprofURL + "heap?gc=1"
	switch {
	case d > 0:
		url = fmt.Sprintf("%sprofile?seconds=%d", c.pprofURL, int(d.Seconds()))
	case d < 0:
		url, d = c.pprofURL+"goroutine", 0
	}
	resp, err := (&http.Client{Timeout: d + time.Minute}).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// serve serves h on a loopback port and returns its base URL.
func serve(h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), nil
}
