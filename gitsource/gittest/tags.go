package gittest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// AddRunTags creates n tags named run/<prefix>-NNNNN on commit in the bare
// repository dir, the first annotated of them annotated (each its own tag
// object), with one `git fast-import` and packs the refs: a repository
// with tens of thousands of run tags in seconds.
func AddRunTags(env []string, dir, commit, prefix string, n, annotated int) error {
	cmd := exec.Command("git", "fast-import", "--quiet", "--done", "--force")
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	w := bufio.NewWriter(stdin)
	for i := range n {
		name := fmt.Sprintf("run/%s-%05d", prefix, i)
		if i < annotated {
			msg := fmt.Sprintf("sweep point %d\n", i)
			fmt.Fprintf(w, "tag %s\nfrom %s\ntagger Tau Tester <tester@example.com> 1700000000 +0000\ndata %d\n%s\n", name, commit, len(msg), msg)
			continue
		}
		fmt.Fprintf(w, "reset refs/tags/%s\nfrom %s\n\n", name, commit)
	}
	fmt.Fprint(w, "done\n")
	werr := w.Flush()
	cerr := stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git fast-import: %w", err)
	}
	if werr != nil || cerr != nil {
		return fmt.Errorf("writing fast-import stream: %w", errors.Join(werr, cerr))
	}
	_, err = Git(env, dir, nil, "pack-refs", "--all")
	return err
}
