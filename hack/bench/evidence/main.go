// Command evidence-bench measures the evidence bundle and page: the time
// to build and seal the bundle of a run with a large log, its size, and
// the page's latency under concurrent readers.
//
//	go run ./hack/bench/evidence [-log-mb 10] [-pods 1] [-readers 50] [-requests 5000]
//
// The bundle is built the way the controller builds it (bounded tail,
// masking, metrics scan, re-render, seal, write to a filesystem store); the
// cluster reads are not part of it. Results print as Markdown for
// docs/benchmarks.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/taugrid/taugrid/evidence"
)

func main() {
	logMB := flag.Int("log-mb", 10, "megabytes of log per pod")
	pods := flag.Int("pods", 1, "pods in the attempt")
	readers := flag.Int("readers", 50, "concurrent page readers")
	requests := flag.Int("requests", 2000, "page requests in all, per format")
	flag.Parse()
	if err := run(*logMB, *pods, *readers, *requests); err != nil {
		fmt.Fprintln(os.Stderr, "evidence-bench:", err)
		os.Exit(1)
	}
}

func run(logMB, pods, readers, requests int) error {
	dir, err := os.MkdirTemp("", "evidence-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	root, err := repoRoot()
	if err != nil {
		return err
	}
	fmt.Printf("%s, %d CPUs, GOMAXPROCS %d\n\n", runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	in, err := loadInputs(root)
	if err != nil {
		return err
	}
	logs := makeLogs(logMB<<20, pods)
	fmt.Println("| bundle | log read | build + seal + write, median (p90) of 20 | bundle size | artifacts |")
	fmt.Println("|---|---|---|---|---|")
	for _, mode := range []tailMode{kubeletTail, unboundedStream} {
		st, err := evidence.NewFileStore(filepath.Join(dir, string(mode)))
		if err != nil {
			return err
		}
		res, err := measureBuild(context.Background(), st, in, logs, mode)
		if err != nil {
			return err
		}
		fmt.Printf("| %d pod(s) × %d MB of log, %s | %s | %s (%s) | %s | %d |\n", pods, logMB, mode, human(res.read),
			res.median.Round(10*time.Microsecond), res.p90.Round(10*time.Microsecond), human(int64(res.size)), res.artifacts)
	}
	fmt.Println()
	// The page of a run retried twice: three sealed attempts, each with
	// its log tail.
	st, err := evidence.NewFileStore(filepath.Join(dir, "page"))
	if err != nil {
		return err
	}
	for i := range 3 {
		sealed, err := build(in, logs, kubeletTail, i, new(int64))
		if err != nil {
			return err
		}
		if err := evidence.Write(context.Background(), st, sealed); err != nil {
			return err
		}
	}
	return measurePage(st, readers, requests)
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "examples", "research")); err == nil {
				return dir, nil
			}
		}
	}
	return "", fmt.Errorf("run from inside the TauGrid repository")
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
