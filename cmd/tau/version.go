package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// The release this binary was built as, the commit and the commit's date:
// make release sets them (-ldflags "-X main.version=v1.2.3 -X
// main.commit=... -X main.date=..."); a plain go build says "dev" and takes
// the commit from the Go toolchain's VCS stamp, when it made one.
var version, commit, date = "dev", "", ""

// buildInfo is what the build itself recorded: the version it was given,
// and from the Go toolchain's VCS stamp the commit, whether the tree had
// changes, and the commit's time, which is the build's date (a rebuild of
// the same commit says the same, so two builds give the same bytes).
type buildInfo struct {
	Version, Commit, Date, Go, Platform string
	Modified                            bool
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: "unknown", Date: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b.stamped()
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Date = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b.stamped()
}

// stamped takes the commit and date make release gave, when it did.
func (b buildInfo) stamped() buildInfo {
	if commit != "" {
		b.Commit, b.Modified = commit, false
	}
	if date != "" {
		b.Date = date
	}
	return b
}

func (b buildInfo) String() string {
	commit := b.Commit
	if b.Modified {
		commit += " (with uncommitted changes)"
	}
	return fmt.Sprintf("tau %s\ncommit: %s\nbuilt:  %s (the commit's date)\ngo:     %s %s\n", b.Version, commit, b.Date, b.Go, b.Platform)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tau's version, the commit it was built from and the build's date",
		Example: `  tau version
  tau version | head -1    # the version alone, for a script`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), readBuildInfo())
			return err
		},
	}
}
