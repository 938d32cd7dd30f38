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
	if p := t.RunRefPrefix; p != "" && (!strings.HasPrefix(p, "refs/") || !strings.HasSuffix(p, "/")) {
		errs = append(errs, fmt.Errorf("runRefPrefix: %q must start with refs/ and end with /", p))
	}
	return errors.Join(errs...)
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
