package main

import (
	"bytes"
	"strings"
	"testing"
)

// tau version prints what the build was given: the version, the commit
// and its date (make release's -ldflags), and the toolchain and platform.
func TestVersionPrintsWhatTheBuildWasGiven(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-12-04T10:00:00Z"
	var out, errs bytes.Buffer
	root := newRootCmd(&out, &errs)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatalf("tau version: %v (%s)", err, errs.String())
	}
	for _, want := range []string{"tau v1.2.3\n", "commit: 0123456789abcdef0123456789abcdef01234567\n", "built:  2026-12-04T10:00:00Z (the commit's date)\n", "go:     go1."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tau version printed %q, want it to contain %q", out.String(), want)
		}
	}
	root = newRootCmd(&out, &errs)
	root.SetArgs([]string{"version", "extra"})
	if err := root.Execute(); err == nil {
		t.Error("tau version extra: no error, want one (it takes no arguments)")
	}
}
