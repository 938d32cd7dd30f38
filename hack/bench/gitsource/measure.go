package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// sample is what one run cost the client.
type sample struct {
	Wall   time.Duration `json:"wall"`
	CPU    time.Duration `json:"cpu"`    // user + system, children included
	MaxRSS int64         `json:"maxrss"` // KiB, the largest process
	Allocs uint64        `json:"allocs,omitempty"`
	Bytes  uint64        `json:"bytes,omitempty"`
}

func (s sample) add(o sample) sample {
	return sample{Wall: s.Wall + o.Wall, CPU: s.CPU + o.CPU, MaxRSS: max(s.MaxRSS, o.MaxRSS),
		Allocs: s.Allocs + o.Allocs, Bytes: s.Bytes + o.Bytes}
}

// run executes a command and measures it with wait4's rusage, which
// includes the processes it waited for (git's helpers).
func run(env []string, dir string, name string, args ...string) (sample, []byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = env, dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return sample{}, nil, fmt.Errorf("%s %v: %w: %s", name, args, err, errb.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{
		Wall:   wall,
		CPU:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		MaxRSS: ru.Maxrss,
	}, out.Bytes(), nil
}

// self runs this program's child mode and decodes the samples it prints.
func self(args ...string) (sample, []sample, error) {
	exe, err := os.Executable()
	if err != nil {
		return sample{}, nil, err
	}
	outer, out, err := run(os.Environ(), "", exe, append([]string{"child"}, args...)...)
	if err != nil {
		return sample{}, nil, err
	}
	var inner []sample
	if err := json.Unmarshal(out, &inner); err != nil {
		return sample{}, nil, fmt.Errorf("child output %q: %w", out, err)
	}
	return outer, inner, nil
}

func selfUsage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// median of samples by wall time.
func median(s []sample) sample {
	slices.SortFunc(s, func(a, b sample) int { return int(a.Wall - b.Wall) })
	return s[len(s)/2]
}

// server is a git server in its own process.
type server struct {
	base string // URL prefix, e.g. http://127.0.0.1:1234/
	cmd  *exec.Cmd
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// startServer serves root over HTTP, with git http-backend behind
// net/http/cgi as the tests do, in a process of its own. (gitsource
// refuses git:// URLs, which carry no integrity, so there is no git daemon
// variant.)
func startServer(root string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", root, addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return &server{base: "http://" + addr + "/", cmd: cmd}, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return nil, fmt.Errorf("the git server did not start")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serve is the http server process: serve ROOT ADDR.
func serve(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("serve ROOT ADDR")
	}
	srv := &http.Server{Addr: args[1], Handler: &gittest.HTTPServer{Root: args[0]}, ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func ratio(a, b time.Duration) string { return fmt.Sprintf("%.2fx", float64(a)/float64(b)) }
