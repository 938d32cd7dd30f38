package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/taugrid/taugrid/api/runname"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// maxRunName keeps a run's name short enough for everything derived from
// it (see runname.MaxRunNameLength, which the CRD enforces).
const maxRunName = runname.MaxRunNameLength

// RunName is the deterministic name of the TauRun for one trigger:
// (repository, ref, commit, target) always gives the same name, so a run is
// created at most once, whatever restarts or duplicate deliveries happen.
// It reads "<repository>-<target>-<hash>", shortened to fit, and is always
// a DNS-1123 label (runname.ValidateRunName): a repository named
// "exp.v2" gives "exp-v2-<hash>".
func RunName(repository, ref, commit, target string) string {
	sum := sha256.Sum256([]byte(repository + "\x00" + ref + "\x00" + commit + "\x00" + target))
	hash := hex.EncodeToString(sum[:])[:10]
	parts := []string{runname.SuggestLabel(repository, 24)}
	if target != "default" {
		parts = append(parts, runname.SuggestLabel(target, 12))
	}
	prefix := trimName(strings.Trim(strings.Join(parts, "-"), "-"), maxRunName-len(hash)-1)
	if prefix == "" {
		prefix = "run"
	}
	return prefix + "-" + hash
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

// ID is the name a researcher types for run r: its run ref's id (what tau
// run printed), or else the run's name.
func ID(r *taugridv1.TauRun) string {
	if id, ok := strings.CutPrefix(r.Spec.Trigger.Ref, taugridv1.RunRefPrefix); ok {
		return id
	}
	return r.Name
}
