package gitsource

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/taugrid/taugrid/api/runname"
)

// Kind is what a detected event asks for.
type Kind string

const (
	// KindRunTag: a tag matching a run pattern appeared or moved.
	KindRunTag Kind = "RunTag"
	// KindRunRef: a ref appeared (or moved) under the run ref prefix.
	KindRunRef Kind = "RunRef"
	// KindBranchChange: new commits on a watched branch changed a tau file.
	KindBranchChange Kind = "BranchChange"
	// KindCancel: a run tag or run ref was deleted or moved away from the
	// commit it requested; the run it started should stop.
	KindCancel Kind = "Cancel"
)

// Event is one run request (or cancellation) found in a repository's refs.
// Runs are identified by (repository, Ref, Commit, Target).
type Event struct {
	Kind Kind
	// Ref is the full ref name, e.g. refs/tau/runs/r-7f3a.
	Ref string
	// Commit is the commit to run; for KindCancel, the commit the ref
	// pointed at before.
	Commit string
	// Tag is the annotated tag object, whose signature can be verified;
	// empty for lightweight tags and branches.
	Tag string
	// Target is the tau file to run: "default" or the name of
	// tau/<target>.yaml.
	Target string
	// Tagger is the annotated tag's tagger, "Name <email>".
	Tagger string
	// Requester is who asked: the run request's requester, else the
	// tagger's or the commit author's email.
	Requester string
	// Overrides are the run request's field overrides.
	Overrides map[string]string
	// Truncated: the branch walk hit MaxWalk or the shallow boundary
	// before reaching commits seen before, so an older tau change may have
	// been missed, or this one seen before.
	Truncated bool
}

// Problem is a ref that requests a run but cannot be honoured as it is,
// e.g. a run ref whose message does not parse. Nothing runs for it.
type Problem struct {
	Ref string
	// SHA is the object the ref names (a commit or an annotated tag).
	SHA    string
	Commit string
	Err    error
}

// Detection is what changed between two observations of a repository.
type Detection struct {
	Events   []Event
	Problems []Problem
}

// Graph reads the commits and tags a detection needs. Objects are expected
// to be fetched already: Detect never touches the network. Missing objects
// are errors matching ErrNotFound.
type Graph interface {
	Commit(sha string) (Commit, error)
	Tag(sha string) (Tag, error)
	// TauFiles maps the paths matching patterns at commit to their blob
	// SHAs.
	TauFiles(commit string, patterns []string) (map[string]string, error)
}

// Commit is the part of a commit object detection reads.
type Commit struct {
	SHA     string
	Parents []string
	Time    time.Time // committer time
	Author  string    // "Name <email>"
}

// Tag is the part of an annotated tag object detection reads.
type Tag struct {
	SHA        string
	Name       string
	Target     string
	TargetType string // "commit", "tag", "tree", "blob"
	Tagger     string // "Name <email>"
	Message    string // without the signature
}

// Detect compares the watched refs of two observations of a repository and
// says which runs to start or cancel. It is a pure function of its
// arguments: the same refs and graph always give the same events, in ref
// order. Every new run ref or run tag is its own event, even when several
// point at one commit. A branch that moved yields at most one event per
// tau target changed by the newest new commit that changed any; older new
// commits never run. A force-pushed branch counts only commits not reachable
// from its previous head. Errors are graph failures (objects not fetched),
// not bad refs, which become Problems.
func Detect(prev, cur RefSet, t Triggers, g Graph) (Detection, error) {
	t = t.WithDefaults()
	var d Detection
	for _, name := range changedRefs(prev, cur, t) {
		p, inPrev := prev[name]
		c, inCur := cur[name]
		var err error
		switch t.kindOf(name) {
		case refRunTag, refRunRef:
			err = detectRun(&d, t, g, name, p, inPrev, c, inCur)
		case refBranch:
			if inCur {
				err = detectBranch(&d, t, g, name, c, prevHeads(prev, t, name))
			}
		}
		if err != nil {
			return Detection{}, err
		}
	}
	return d, nil
}

// changedRefs lists, sorted, the watched refs that appeared, moved or went.
func changedRefs(prev, cur RefSet, t Triggers) []string {
	var names []string
	for name, c := range cur {
		if p, ok := prev[name]; (!ok || p.SHA != c.SHA) && t.kindOf(name) != refIgnored {
			names = append(names, name)
		}
	}
	for name := range prev {
		if _, ok := cur[name]; !ok && t.kindOf(name) != refIgnored {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// detectRun handles a run tag or run ref that appeared, moved or went.
func detectRun(d *Detection, t Triggers, g Graph, name string, p Ref, inPrev bool, c Ref, inCur bool) error {
	if inPrev {
		d.Events = append(d.Events, Event{Kind: KindCancel, Ref: name, Commit: p.Commit(), Tag: tagObject(p)})
	}
	if !inCur {
		return nil
	}
	kind := KindRunTag
	if t.kindOf(name) == refRunRef {
		kind = KindRunRef
	}
	ev := Event{Kind: kind, Ref: name, Commit: c.Commit(), Tag: tagObject(c), Target: "default"}
	if ev.Tag == "" {
		d.Events = append(d.Events, ev)
		return nil
	}
	tag, err := g.Tag(ev.Tag)
	if err != nil {
		return fmt.Errorf("reading tag %s of %s: %w", ev.Tag, name, err)
	}
	ev.Tagger = tag.Tagger
	ev.Requester = emailOf(tag.Tagger)
	req, err := ParseRunRequest(tag.Message)
	switch {
	case err != nil && (kind == KindRunRef || IsRunRequestShaped(err)):
		// A run tag's message may be any text, but one that is a run
		// request with a wrong value must not silently run the default.
		d.Problems = append(d.Problems, Problem{Ref: name, SHA: c.SHA, Commit: ev.Commit, Err: err})
		return nil
	case err == nil:
		ev.Target, ev.Overrides = req.Target, req.Overrides
		if req.Requester != "" {
			ev.Requester = req.Requester
		}
	}
	// A run tag's message that is not a run request is just a message.
	d.Events = append(d.Events, ev)
	return nil
}

func tagObject(r Ref) string {
	if r.Peeled != "" && r.Peeled != r.SHA {
		return r.SHA
	}
	return ""
}

// prevHeads are the commits whose history counts as seen for branch name:
// its own previous head, or for a new branch, every watched branch's.
func prevHeads(prev RefSet, t Triggers, name string) []string {
	if p, ok := prev[name]; ok {
		return []string{p.SHA}
	}
	var heads []string
	for _, n := range slices.Sorted(maps.Keys(prev)) {
		if t.kindOf(n) == refBranch {
			heads = append(heads, prev[n].SHA)
		}
	}
	return heads
}

// detectBranch walks the new commits of a branch, newest first, and emits
// events for the first that changes a tau file.
func detectBranch(d *Detection, t Triggers, g Graph, name string, c Ref, seenHeads []string) error {
	seen, complete, err := ancestors(g, seenHeads, 4*t.MaxWalk)
	if err != nil {
		return err
	}
	w := newWalk(g, seen, t.MaxWalk)
	w.truncated = !complete // without the old head, what is new is a guess
	if err := w.push(c.SHA); err != nil {
		return err
	}
	for {
		commit, ok, err := w.next()
		if err != nil || !ok {
			return err
		}
		changed, known, err := changedTauFiles(g, t, commit)
		if err != nil {
			return err
		}
		if !known {
			w.truncated = true
			continue
		}
		if len(changed) > 0 {
			for _, f := range changed {
				target := TargetOf(f)
				if err := runname.ValidateTarget(target); err != nil {
					d.Problems = append(d.Problems, Problem{Ref: name, SHA: c.SHA, Commit: commit.SHA, Err: fmt.Errorf("%s: %w", f, err)})
					continue
				}
				d.Events = append(d.Events, Event{Kind: KindBranchChange, Ref: name, Commit: commit.SHA,
					Target: target, Requester: emailOf(commit.Author), Truncated: w.truncated})
			}
			return nil
		}
	}
}

// changedTauFiles lists the tau files that commit adds or modifies
// relative to its first parent, sorted. known is false when the parent is
// beyond the fetched history.
func changedTauFiles(g Graph, t Triggers, c Commit) (changed []string, known bool, err error) {
	now, err := g.TauFiles(c.SHA, t.TauFiles)
	if err != nil {
		return nil, false, fmt.Errorf("reading tau files at %s: %w", c.SHA, err)
	}
	var before map[string]string
	if len(c.Parents) > 0 {
		before, err = g.TauFiles(c.Parents[0], t.TauFiles)
		if errors.Is(err, ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading tau files at %s: %w", c.Parents[0], err)
		}
	}
	for path, blob := range now {
		if before[path] != blob {
			changed = append(changed, path)
		}
	}
	slices.Sort(changed)
	return changed, true, nil
}

// ancestors collects heads and their ancestors, up to limit commits;
// history beyond the fetched part is cut. complete is false when a head
// itself is missing.
func ancestors(g Graph, heads []string, limit int) (seen map[string]bool, complete bool, err error) {
	seen = make(map[string]bool)
	complete = true
	for _, h := range heads {
		if _, err := g.Commit(h); errors.Is(err, ErrNotFound) {
			complete = false
		}
	}
	queue := slices.Clone(heads)
	for len(queue) > 0 && len(seen) < limit {
		sha := queue[0]
		queue = queue[1:]
		if seen[sha] {
			continue
		}
		seen[sha] = true
		c, err := g.Commit(sha)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		queue = append(queue, c.Parents...)
	}
	return seen, complete, nil
}

func emailOf(ident string) string {
	i, j := strings.IndexByte(ident, '<'), strings.IndexByte(ident, '>')
	if i >= 0 && j > i {
		return ident[i+1 : j]
	}
	return ""
}
