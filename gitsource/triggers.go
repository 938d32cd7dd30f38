package gitsource

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"strings"
)

// Triggers say which refs of a repository request runs: the triggers of a
// TauRepository.
type Triggers struct {
	// RunTags are glob patterns (path.Match) over tag names without
	// "refs/tags/"; a new or moved matching tag requests a run. Default
	// ["run/*"].
	RunTags []string
	// RunRefPrefix is where `tau run` pushes run refs. Default
	// "refs/tau/runs/".
	RunRefPrefix string
	// Branches are glob patterns over branch names without "refs/heads/";
	// new commits there that change a tau file request a run. Default none.
	Branches []string
	// TauFiles are glob patterns over the paths of tau files. Wildcards
	// are allowed in the last path element only. Default ["tau.yaml",
	// "tau/*.yaml"].
	TauFiles []string
	// MaxWalk bounds the commits one branch update examines. Default 100.
	MaxWalk int
}

// DefaultRunRefPrefix is where `tau run` pushes run refs.
const DefaultRunRefPrefix = "refs/tau/runs/"

// WithDefaults fills in the defaults of unset fields.
func (t Triggers) WithDefaults() Triggers {
	if t.RunTags == nil {
		t.RunTags = []string{"run/*"}
	}
	if t.RunRefPrefix == "" {
		t.RunRefPrefix = DefaultRunRefPrefix
	}
	if t.TauFiles == nil {
		t.TauFiles = []string{"tau.yaml", "tau/*.yaml"}
	}
	if t.MaxWalk <= 0 {
		t.MaxWalk = 100
	}
	return t
}

// Validate reports malformed patterns, naming the field.
func (t Triggers) Validate() error {
	var errs []error
	check := func(field string, patterns []string) {
		for i, p := range patterns {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				errs = append(errs, fmt.Errorf("%s[%d]: invalid pattern %q", field, i, p))
			}
		}
	}
	check("runTags", t.RunTags)
	check("branches", t.Branches)
	check("tauFiles", t.TauFiles)
	for i, p := range t.TauFiles {
		if dir, _ := path.Split(p); strings.ContainsAny(dir, "*?[\\") || strings.HasPrefix(p, "/") {
			errs = append(errs, fmt.Errorf("tauFiles[%d]: %q: wildcards only in the file name", i, p))
		}
	}
	if err := ValidateRunRefPrefix(t.RunRefPrefix); t.RunRefPrefix != "" && err != nil {
		errs = append(errs, fmt.Errorf("runRefPrefix: %w", err))
	}
	return errors.Join(errs...)
}

// ValidateRunRefPrefix accepts a run ref prefix only in a ref namespace
// that only those who may push to the repository write: refs/tau/ (where
// `tau run` pushes), or a directory of branches or tags
// (refs/heads/<dir>/, refs/tags/<dir>/). Forges write other namespaces on
// behalf of people without push access (refs/pull/ for anyone who opens a
// pull request, refs/merge-requests/, refs/changes/), and notes, remotes
// and stashes are not run requests: a prefix there would let a stranger
// request runs.
func ValidateRunRefPrefix(p string) error {
	want := "want refs/tau/<dir>/, refs/heads/<dir>/ or refs/tags/<dir>/ (default " + DefaultRunRefPrefix + ")"
	if !strings.HasPrefix(p, "refs/") || !strings.HasSuffix(p, "/") {
		return fmt.Errorf("%q must start with refs/ and end with /: %s", p, want)
	}
	parts := strings.Split(strings.TrimSuffix(p, "/"), "/")
	for _, part := range parts {
		if !validRefComponent(part) {
			return fmt.Errorf("%q: %q is not a valid part of a git ref name (no empty parts, no leading dot, no .lock, none of ~^:?*[\\ or spaces): %s", p, part, want)
		}
	}
	switch {
	case parts[1] == "tau":
		return nil
	case (parts[1] == "heads" || parts[1] == "tags") && len(parts) >= 3:
		return nil
	case parts[1] == "heads" || parts[1] == "tags":
		return fmt.Errorf("%q would make every %s a run request: %s", p, map[string]string{"heads": "branch", "tags": "tag"}[parts[1]], want)
	}
	return fmt.Errorf("%q is in refs/%s/, which people who cannot push to the repository may write (a forge writes refs/pull/ for anyone who opens a pull request): %s", p, parts[1], want)
}

// validRefComponent follows git check-ref-format for one path component.
func validRefComponent(c string) bool {
	if c == "" || strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") || strings.Contains(c, "..") || strings.Contains(c, "@{") || c == "@" {
		return false
	}
	for _, r := range c {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}

type refKind int

const (
	refIgnored refKind = iota
	refRunTag
	refRunRef
	refBranch
)

func (t Triggers) kindOf(name string) refKind {
	switch {
	case strings.HasPrefix(name, t.RunRefPrefix) && len(name) > len(t.RunRefPrefix):
		return refRunRef
	case strings.HasPrefix(name, "refs/tags/"):
		if matchAny(t.RunTags, strings.TrimPrefix(name, "refs/tags/")) {
			return refRunTag
		}
	case strings.HasPrefix(name, "refs/heads/"):
		if matchAny(t.Branches, strings.TrimPrefix(name, "refs/heads/")) {
			return refBranch
		}
	}
	return refIgnored
}

// Watched is the part of refs these triggers look at: what a TauRepository
// keeps as its observed refs.
func (t Triggers) Watched(refs RefSet) RefSet {
	t = t.WithDefaults()
	// Most refs of a large repository are watched (run tags): copying the
	// map whole and deleting the few others is cheaper than inserting each.
	out := maps.Clone(refs)
	maps.DeleteFunc(out, func(name string, _ Ref) bool { return t.kindOf(name) == refIgnored })
	return out
}

// Baseline is what to pass as the previous refs on a repository's first
// observation: everything already there counts as seen, except run refs,
// which are explicit requests that `tau run` may have pushed before the
// repository was registered.
func (t Triggers) Baseline(cur RefSet) RefSet {
	t = t.WithDefaults()
	out := make(RefSet)
	for name, r := range t.Watched(cur) {
		if t.kindOf(name) != refRunRef {
			out[name] = r
		}
	}
	return out
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if match(p, name) {
			return true
		}
	}
	return false
}

// match is path.Match(p, name) for a valid p, without its work for the
// commonest pattern, a literal prefix and one trailing "*" ("run/*"): an
// idle poll of 20,000 run tags matched each tag, 3 ms of its CPU.
func match(p, name string) bool {
	if prefix, ok := strings.CutSuffix(p, "*"); ok && !strings.ContainsAny(prefix, `*?[\`) {
		return strings.HasPrefix(name, prefix) && !strings.Contains(name[len(prefix):], "/")
	}
	ok, _ := path.Match(p, name)
	return ok
}

// TargetOf names the target of a tau file: "default" for tau.yaml, else
// the file name without its extension (tau/ray.yaml is "ray").
func TargetOf(file string) string {
	if file == "tau.yaml" {
		return "default"
	}
	base := path.Base(file)
	return strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
}

// TargetFile is the tau file of a target: tau.yaml for "default", else
// tau/<target>.yaml.
func TargetFile(target string) string {
	if target == "" || target == "default" {
		return "tau.yaml"
	}
	return "tau/" + target + ".yaml"
}
