package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/taugrid/taugrid/gitsource/gittest"
)

// setupRefsRepo makes a repository with n run refs, written as a
// packed-refs file.
func setupRefsRepo(n int) (string, error) {
	root := filepath.Join(benchDir(), fmt.Sprintf("refs-%d", n))
	bare := filepath.Join(root, "many.git")
	if _, err := os.Stat(filepath.Join(root, "done")); err == nil {
		return root, nil
	}
	_ = os.RemoveAll(root)
	env := gittest.Env(benchDir())
	if err := gittest.InitBare(env, bare); err != nil {
		return "", err
	}
	stream := "commit refs/heads/main\ncommitter A <a@example.com> 1767225600 +0000\ndata 2\nc\nM 100644 inline tau.yaml\ndata 8\nname: a\n\n"
	if _, err := gittest.Git(env, bare, []byte(stream), "fast-import", "--quiet"); err != nil {
		return "", err
	}
	head, err := gittest.Git(env, bare, nil, "rev-parse", "main")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	for i := range n {
		fmt.Fprintf(&b, "%s refs/tau/runs/r%06d\n", head, i)
	}
	if err := os.WriteFile(filepath.Join(bare, "packed-refs"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return root, os.WriteFile(filepath.Join(root, "done"), nil, 0o644)
}

func runRefs(args []string) error {
	fl := newFlags("refs")
	n := fl.Int("refs", 10000, "run refs in the repository")
	_ = fl.Parse(args)
	root, err := setupRefsRepo(*n)
	if err != nil {
		return err
	}
	srv, err := startServer(root)
	if err != nil {
		return err
	}
	defer srv.stop()
	url := srv.base + "many.git"
	var cli []sample
	for range 5 {
		s, _, err := run(gittest.Env(os.TempDir()), "", "git", "ls-remote", url)
		if err != nil {
			return err
		}
		cli = append(cli, s)
	}
	var cold, warm []sample
	for range 5 {
		_, inner, err := self("list", url, fmt.Sprint(*n+1))
		if err != nil {
			return err
		}
		cold, warm = append(cold, inner[0]), append(warm, inner[1])
	}
	c, w, g := median(cli), median(cold), median(warm)
	fmt.Printf("\n### Listing a repository with %d run refs (over HTTP, median of 5)\n\n", *n)
	fmt.Println("| client | wall | client CPU | allocations |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| `git ls-remote` | %s | %s | |\n", ms(c.Wall), ms(c.CPU))
	fmt.Printf("| gitsource `ListRefs`, new connection | %s | %s | %d (%.1f MiB) |\n", ms(w.Wall), ms(w.CPU), w.Allocs, float64(w.Bytes)/(1<<20))
	fmt.Printf("| gitsource `ListRefs`, kept-alive connection | %s | %s | %d (%.1f MiB) |\n", ms(g.Wall), ms(g.CPU), g.Allocs, float64(g.Bytes)/(1<<20))
	return nil
}

func runMaterialise(args []string) error {
	fl := newFlags("materialise")
	spec := gittest.LargeSpec{Seed: 1}
	fl.IntVar(&spec.Commits, "commits", 20000, "commits in the generated repository")
	fl.IntVar(&spec.Files, "files", 5000, "files in its tree")
	fl.IntVar(&spec.AvgFileBytes, "file-bytes", 6000, "average file size")
	runs := fl.Int("runs", 3, "runs of each client; the median is shown")
	naive := fl.Bool("naive", true, "also time go-git's PlainClone with a worktree")
	_ = fl.Parse(args)
	root := filepath.Join(benchDir(), "large")
	env := gittest.Env(benchDir())
	start := time.Now()
	if err := gittest.GenerateLarge(env, filepath.Join(root, spec.Name()), spec); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "repository ready in %v\n", time.Since(start).Round(time.Millisecond))
	srv, err := startServer(root)
	if err != nil {
		return err
	}
	defer srv.stop()
	url := srv.base + spec.Name()
	head, err := gittest.Git(env, filepath.Join(root, spec.Name()), nil, "rev-parse", "main")
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "materialise-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	var cli, ours, plain []sample
	for i := range *runs {
		s, err := cliMaterialise(url, filepath.Join(work, fmt.Sprint("cli-", i)))
		if err != nil {
			return err
		}
		cli = append(cli, s)
		outer, _, err := self("archive", url, "refs/heads/main", head, filepath.Join(work, fmt.Sprint("go-", i)))
		if err != nil {
			return err
		}
		ours = append(ours, outer)
		if *naive && i == 0 {
			outer, _, err := self("naive", url, filepath.Join(work, "naive"))
			if err != nil {
				return err
			}
			plain = append(plain, outer)
		}
		_ = os.RemoveAll(filepath.Join(work, fmt.Sprint("cli-", i)))
		_ = os.RemoveAll(filepath.Join(work, fmt.Sprint("go-", i)))
	}
	printMaterialise(spec, filepath.Join(root, spec.Name()), median(cli), median(ours), plain, *runs)
	return nil
}

// printMaterialise writes the results as a Markdown table.
func printMaterialise(spec gittest.LargeSpec, bare string, c, o sample, plain []sample, runs int) {
	packs, _ := filepath.Glob(filepath.Join(bare, "objects", "pack", "*.pack"))
	var packed int64
	for _, p := range packs {
		if fi, err := os.Stat(p); err == nil {
			packed += fi.Size()
		}
	}
	fmt.Printf("\n### Materialising one commit (%d commits, %d files, %.0f MB packed; over HTTP, median of %d)\n\n",
		spec.Commits, spec.Files+4, float64(packed)/1e6, runs)
	fmt.Println("| client | wall | client CPU | peak RSS | time vs CLI | memory vs CLI |")
	fmt.Println("|---|---|---|---|---|---|")
	fmt.Printf("| `git clone --depth 1 --single-branch` + `git archive --format=tar.gz` | %s | %s | %d MiB | 1.00x | 1.00x |\n",
		secs(c.Wall), secs(c.CPU), c.MaxRSS/1024)
	fmt.Printf("| gitsource `Archive` (shallow fetch, pack ingested once, tree walked) | %s | %s | %d MiB | %s | %.2fx |\n",
		secs(o.Wall), secs(o.CPU), o.MaxRSS/1024, ratio(o.Wall, c.Wall), float64(o.MaxRSS)/float64(c.MaxRSS))
	if len(plain) > 0 {
		p := plain[0]
		fmt.Printf("| go-git `PlainClone` depth 1 with worktree, no archive (naive, one run) | %s | %s | %d MiB | %s | %.2fx |\n",
			secs(p.Wall), secs(p.CPU), p.MaxRSS/1024, ratio(p.Wall, c.Wall), float64(p.MaxRSS)/float64(c.MaxRSS))
	}
}

// cliMaterialise is what a shell script would do: a shallow clone, then
// an archive of HEAD.
func cliMaterialise(url, dir string) (sample, error) {
	env := gittest.Env(os.TempDir())
	clone, _, err := run(env, "", "git", "clone", "--quiet", "--depth", "1", "--single-branch", url, dir)
	if err != nil {
		return sample{}, err
	}
	archive, _, err := run(env, dir, "git", "archive", "--format=tar.gz", "-o", filepath.Join(dir, "..", filepath.Base(dir)+".tar.gz"), "HEAD")
	if err != nil {
		return sample{}, err
	}
	return clone.add(archive), nil
}
