package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// gitCLI runs the user's own git, so their credential helpers, SSH agent
// and signing configuration apply to what tau pushes.
type gitCLI struct {
	dir string
	env []string // extra environment, e.g. GIT_INDEX_FILE
}

func (g gitCLI) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), g.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (g gitCLI) with(env ...string) gitCLI {
	return gitCLI{dir: g.dir, env: append(append([]string(nil), g.env...), env...)}
}

// config reads one git config value, "" when unset.
func (g gitCLI) config(ctx context.Context, key string) string {
	v, _ := g.run(ctx, "config", "--get", key)
	return v
}
