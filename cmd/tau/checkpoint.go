package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/taugrid/taugrid/render"
)

// latestCheckpoint is the newest complete checkpoint directly under dir: the
// subdirectory whose completion marker was written last (ties go to the
// later name). Directories without the marker are partial writes, such as
// those of a pod killed mid-save, and are skipped. It returns "" when dir
// holds no complete checkpoint or does not exist yet.
func latestCheckpoint(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the checkpoint directory: %w", err)
	}
	var best string
	var bestTime time.Time
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := os.Stat(filepath.Join(dir, e.Name(), render.CheckpointMarker))
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if t := info.ModTime(); best == "" || t.After(bestTime) || t.Equal(bestTime) && e.Name() > filepath.Base(best) {
			best, bestTime = filepath.Join(dir, e.Name()), t
		}
	}
	return best, nil
}

// linkResume points link at the latest complete checkpoint under dir, or
// removes it when there is none, and returns the checkpoint. The link is
// replaced atomically, so a reader sees the old target or the new one.
func linkResume(dir, link string) (string, error) {
	ckpt, err := latestCheckpoint(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return "", err
	}
	if ckpt == "" {
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", nil
	}
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(ckpt, tmp); err != nil {
		return "", err
	}
	return ckpt, os.Rename(tmp, link)
}
