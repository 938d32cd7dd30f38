// Package runname is the one rule for run targets and run names, which the
// CRD, the CLI, git (run requests) and the controllers all apply.
package runname

import (
	"fmt"
	"regexp"
	"strings"
)

// The one rule for run targets and run names, shared by `tau run`, the run
// request parser, the repository reconciler and the CRD. The CRD's markers
// (TauRunSpec.Target, the CEL rule on TauRun's name) must spell the same
// patterns; a test compares the generated CRD with these constants.
const (
	// LabelPattern is a DNS-1123 label: what a run's Job, its pods and a
	// RayJob's services accept as (part of) their names.
	LabelPattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// MaxTargetLength is the longest target: a label.
	MaxTargetLength = 63
	// MaxRunNameLength keeps a run's name short enough for everything
	// derived from it: its Job "<run>-<attempt>" and that Job's pods
	// "<job>-<index>-<5 chars>" must stay within 63 characters, and a
	// RayJob "<run>-<attempt>" within KubeRay's 47 (attempts go up to 101).
	MaxRunNameLength = 43
)

var labelRe = regexp.MustCompile(LabelPattern)

// ValidateTarget says why target cannot name a tau file tau/<target>.yaml
// that runs; nil when it can. The message suggests the nearest valid name.
func ValidateTarget(target string) error {
	if target == "" {
		return fmt.Errorf("the target is empty: want \"default\" (tau.yaml) or the name of tau/<target>.yaml")
	}
	if len(target) <= MaxTargetLength && labelRe.MatchString(target) {
		return nil
	}
	why := "want lowercase letters, digits and '-', starting and ending with a letter or digit"
	if len(target) > MaxTargetLength {
		why = fmt.Sprintf("want at most %d characters", MaxTargetLength)
	}
	msg := fmt.Sprintf("%q is not a target name: %s", truncate(target, 80), why)
	if s := SuggestLabel(target, MaxTargetLength); s != "" && s != target {
		msg += fmt.Sprintf(" (rename the file tau/%s.yaml?)", s)
	}
	return fmt.Errorf("%s", msg)
}

// ValidateRunName says why name cannot be a TauRun's name; nil when it can.
func ValidateRunName(name string) error {
	if len(name) > MaxRunNameLength || !labelRe.MatchString(name) {
		return fmt.Errorf("%q is not a run name: want a DNS-1123 label of at most %d characters", truncate(name, 80), MaxRunNameLength)
	}
	return nil
}

// SuggestLabel is s made into a DNS-1123 label of at most n characters:
// lowercased, other characters replaced by '-', trimmed. "" when nothing
// is left.
func SuggestLabel(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
		if b.Len() >= n {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
