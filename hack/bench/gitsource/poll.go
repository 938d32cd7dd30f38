package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// setupPollRepos makes n small repositories, each with a main branch, 10
// lightweight and 10 annotated run tags and 2 run refs: a template made
// with git fast-import, copied n times.
func setupPollRepos(n int) (string, error) {
	root := filepath.Join(benchDir(), fmt.Sprintf("poll-%d", n))
	if _, err := os.Stat(filepath.Join(root, "done")); err == nil {
		return root, nil
	}
	_ = os.RemoveAll(root)
	env := gittest.Env(benchDir())
	tmpl := filepath.Join(root, "template.git")
	if err := gittest.InitBare(env, tmpl); err != nil {
		return "", err
	}
	if _, err := gittest.Git(env, tmpl, []byte(pollHistory()), "fast-import", "--quiet"); err != nil {
		return "", err
	}
	for i := range n {
		if err := copyDir(tmpl, filepath.Join(root, "repos", fmt.Sprintf("r%04d.git", i))); err != nil {
			return "", err
		}
	}
	return root, os.WriteFile(filepath.Join(root, "done"), nil, 0o644)
}

func pollHistory() string {
	var b strings.Builder
	for i := range 5 {
		ts := 1767225600 + i*60
		fmt.Fprintf(&b, "commit refs/heads/main\nmark :%d\ncommitter A <a@example.com> %d +0000\ndata 2\nc%d\n", i+1, ts, i)
		fmt.Fprintf(&b, "M 100644 inline tau.yaml\ndata 9\nname: %d\n\n", i)
	}
	for i := range 10 {
		fmt.Fprintf(&b, "reset refs/tags/run/light-%d\nfrom :%d\n\n", i, i%5+1)
		fmt.Fprintf(&b, "tag run/annotated-%d\nfrom :%d\ntagger A <a@example.com> 1767225600 +0000\ndata 11\ntarget: ray\n", i, i%5+1)
	}
	for i := range 2 {
		fmt.Fprintf(&b, "reset refs/tau/runs/r-%d\nfrom :5\n\n", i)
	}
	return b.String()
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

func runPoll(args []string) error {
	fl := newFlags("poll")
	n := fl.Int("repos", 1000, "repositories to poll")
	conc := fl.Int("concurrency", 8, "concurrent polls for the throughput run")
	branch := fl.Bool("watch-main", false, "also watch main for tau file changes")
	_ = fl.Parse(args)
	root, err := setupPollRepos(*n)
	if err != nil {
		return err
	}
	srv, err := startServer(filepath.Join(root, "repos"))
	if err != nil {
		return err
	}
	defer srv.stop()
	urls := make([]string, *n)
	for i := range urls {
		urls[i] = fmt.Sprintf("%sr%04d.git", srv.base, i)
	}
	urlFile := filepath.Join(root, "urls")
	if err := os.WriteFile(urlFile, []byte(strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	var cli sample
	env := gittest.Env(os.TempDir())
	for _, u := range urls {
		s, _, err := run(env, "", "git", "ls-remote", u)
		if err != nil {
			return err
		}
		cli = cli.add(s)
	}
	_, passes, err := self("poll", urlFile, fmt.Sprint(*conc), fmt.Sprint(*branch))
	if err != nil {
		return err
	}
	cold, warm, parallel := passes[0], passes[1], passes[2]
	perPoll := parallel.CPU / time.Duration(*n)
	watched := "run tags and run refs"
	if *branch {
		watched += ", and main for tau file changes"
	}
	fmt.Printf("\n### Poll of %d unchanged repositories (over HTTP; watching %s)\n\n", *n, watched)
	fmt.Println("| client | wall | client CPU | CPU vs CLI |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| `git ls-remote`, one process per repository | %s | %s | 1.00x |\n", secs(cli.Wall), secs(cli.CPU))
	fmt.Printf("| gitsource `Poll`, first pass (new connections) | %s | %s | %s |\n", secs(cold.Wall), secs(cold.CPU), ratio(cold.CPU, cli.CPU))
	fmt.Printf("| gitsource `Poll`, steady state | %s | %s | %s |\n", secs(warm.Wall), secs(warm.CPU), ratio(warm.CPU, cli.CPU))
	fmt.Printf("| gitsource `Poll`, %d concurrent | %s | %s | %s |\n", *conc, secs(parallel.Wall), secs(parallel.CPU), ratio(parallel.CPU, cli.CPU))
	fmt.Printf("\nCPU per idle poll: %s (CLI %s). 10,000 repositories a minute would take %.3f cores.\n",
		perPoll.String(), (cli.CPU / time.Duration(*n)).String(), perPoll.Seconds()*10000/60)
	return nil
}
