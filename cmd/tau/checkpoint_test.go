package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/taugrid/taugrid/render"
)

func checkpoint(t *testing.T, dir, name string, completed time.Time) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "state.json"), []byte(`{"epoch": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if completed.IsZero() {
		return // a partial write: no marker
	}
	marker := filepath.Join(d, render.CheckpointMarker)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(marker, completed, completed); err != nil {
		t.Fatal(err)
	}
}

func TestTheResumeLinkFollowsTheLatestCompleteCheckpoint(t *testing.T) {
	dir, link := filepath.Join(t.TempDir(), "ckpt", "run-1"), filepath.Join(t.TempDir(), "scratch", "resume")
	if got, err := linkResume(dir, link); err != nil || got != "" {
		t.Fatalf("no checkpoint directory yet: got %q, %v; want none", got, err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("the link exists without a checkpoint: %v", err)
	}

	t0 := time.Now().Add(-time.Hour)
	checkpoint(t, dir, "step-100", t0)
	checkpoint(t, dir, "step-200", t0.Add(time.Minute))
	checkpoint(t, dir, "step-300", time.Time{}) // killed mid-save
	checkpoint(t, dir, ".tmp-step-400", t0.Add(time.Hour))
	got, err := linkResume(dir, link)
	if err != nil || got != filepath.Join(dir, "step-200") {
		t.Fatalf("got %q, %v; want step-200, the newest complete one", got, err)
	}
	data, err := os.ReadFile(filepath.Join(link, "state.json"))
	if err != nil || string(data) != `{"epoch": 1}` {
		t.Fatalf("reading through the link: %q, %v", data, err)
	}

	// The next attempt completes step-300; the link moves.
	if err := os.WriteFile(filepath.Join(dir, "step-300", render.CheckpointMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := linkResume(dir, link); err != nil || got != filepath.Join(dir, "step-300") {
		t.Fatalf("got %q, %v; want step-300", got, err)
	}
	if target, _ := os.Readlink(link); target != filepath.Join(dir, "step-300") {
		t.Fatalf("link points at %q", target)
	}
}

func TestAMarkerThatIsADirectoryIsNotACompleteCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "step-1", render.CheckpointMarker), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := latestCheckpoint(dir); err != nil || got != "" {
		t.Fatalf("got %q, %v; want none", got, err)
	}
}
