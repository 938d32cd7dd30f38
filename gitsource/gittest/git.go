// Package gittest runs the real git CLI and real git servers for the
// gitsource tests and benchmarks: repositories are made and pushed by `git`,
// served by `git http-backend` behind net/http/cgi or by `git upload-pack`
// behind an in-process SSH server.
package gittest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Env is a hermetic environment for git commands: HOME and the global config
// point into dir, the system config is ignored, and nothing prompts.
func Env(dir string) []string {
	env := []string{
		"HOME=" + dir,
		"GIT_CONFIG_GLOBAL=" + filepath.Join(dir, ".gitconfig"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_AUTHOR_NAME=Alice",
		"GIT_AUTHOR_EMAIL=alice@example.com",
		"GIT_COMMITTER_NAME=Alice",
		"GIT_COMMITTER_EMAIL=alice@example.com",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z",
		"GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
		"LANG=C",
	}
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	return env
}

// Git runs git with env in dir, feeding it stdin, and returns its standard
// output with surrounding space trimmed.
func Git(env []string, dir string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// InitBare creates an empty bare repository at dir that accepts pushes over
// HTTP and allows any advertised or reachable object to be wanted.
func InitBare(env []string, dir string) error {
	if _, err := Git(env, "", nil, "init", "--quiet", "--bare", "--initial-branch=main", dir); err != nil {
		return err
	}
	for _, kv := range [][2]string{
		{"http.receivepack", "true"},
		{"uploadpack.allowReachableSHA1InWant", "true"},
		{"receive.denyNonFastForwards", "false"},
	} {
		if _, err := Git(env, dir, nil, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}
