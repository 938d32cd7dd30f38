// Command gitsource-bench measures package gitsource side by side with the
// git CLI, against a local git server in its own process, so only the
// client's CPU is counted.
//
//	go run ./hack/bench/gitsource poll        [-repos 1000]
//	go run ./hack/bench/gitsource refs        [-refs 10000]
//	go run ./hack/bench/gitsource materialise [-commits 20000 -files 5000]
//	go run ./hack/bench/gitsource all
//
// Generated repositories are cached in $TAU_BENCH_DIR, by default
// ${XDG_CACHE_HOME:-~/.cache}/taugrid/bench/gitsource, so reruns only
// measure. Results print as a Markdown table for docs/benchmarks.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "poll":
		err = runPoll(args)
	case "refs":
		err = runRefs(args)
	case "materialise":
		err = runMaterialise(args)
	case "all":
		err = runAll()
	case "serve": // internal: the git server process
		err = serve(args)
	case "child": // internal: one measured go-git run
		err = child(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gitsource-bench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gitsource-bench poll|refs|materialise|all [flags]")
	os.Exit(2)
}

func runAll() error {
	for _, f := range []func([]string) error{runPoll, runRefs, runMaterialise} {
		if err := f(nil); err != nil {
			return err
		}
	}
	return nil
}

// benchDir is where generated repositories are kept between runs.
func benchDir() string {
	if d := os.Getenv("TAU_BENCH_DIR"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "taugrid", "bench", "gitsource")
}

func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ExitOnError)
}
