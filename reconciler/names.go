package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Labels on TauRuns that let the repository reconciler find a run by its
// trigger without listing every run.
const (
	LabelRefHash = "taugrid.dev/ref-hash"
	LabelCommit  = "taugrid.dev/commit"
)

// maxRunName keeps a run's name short enough for everything derived from
// it: its Job "<run>-<attempt>" and that Job's pods "<job>-<index>-<5 chars>"
// must stay within 63 characters, and a RayJob "<run>-<attempt>" within
// KubeRay's 47 (attempts go up to 101).
const maxRunName = 43

// RunName is the deterministic name of the TauRun for one trigger:
// (repository, ref, commit, target) always gives the same name, so a run is
// created at most once, whatever restarts or duplicate deliveries happen.
// It reads "<repository>-<target>-<hash>", shortened to fit.
func RunName(repository, ref, commit, target string) string {
	sum := sha256.Sum256([]byte(repository + "\x00" + ref + "\x00" + commit + "\x00" + target))
	hash := hex.EncodeToString(sum[:])[:10]
	prefix := trimName(repository, 24)
	if target != "" && target != "default" {
		prefix += "-" + trimName(target, 12)
	}
	return trimName(prefix, maxRunName-len(hash)-1) + "-" + hash
}

// RefHash is a label-safe digest of a ref name.
func RefHash(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return hex.EncodeToString(sum[:])[:16]
}

// trimName cuts s to n characters without leaving a trailing '-' or '.'.
func trimName(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "-.")
}
