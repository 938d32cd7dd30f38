package repository

import (
	"context"
	"maps"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationRefObject is the object (annotated tag or commit) a run tag or
// run ref named when it requested the run: with the ref's name, what makes
// the TauRun the record that this ref was handled.
const AnnotationRefObject = "taugrid.dev/ref-object"

// runRefPoll rebuilds and records one poll's run tags and run refs through
// the repository's bounded ledger (status.runRefs) and its TauRuns, instead
// of storing every ref in the status.
type runRefPoll struct {
	r    *RepositoryReconciler
	repo *taugridv1.TauRepository
	// indexed: runs were listed (the listing changed since the ledger).
	indexed bool
	index   gitsource.RunIndex
	// cancels are live runs whose ref went or moved that the rebuilt
	// previous refs cannot carry (a second run of one ref).
	cancels []gitsource.Event
	// unchanged: the listing has the ledger's digest.
	unchanged bool
}

// previous gives Poll the watched branches of prev (as before) and the run
// refs rebuilt from the ledger and the TauRuns. Run refs that an older
// status kept in prev count as seen.
func (p *runRefPoll) previous(ctx context.Context, prev gitsource.RefSet, t gitsource.Triggers) gitsource.Previous {
	return func(cur gitsource.RefSet) (gitsource.RefSet, error) {
		branches := t.WatchedBranches(prev)
		// An unchanged listing (the idle poll of a large repository) costs
		// one pass over it: no ledger decoding, no runs listed, no copy.
		if l := p.repo.Status.RunRefs; l != nil && l.Digest != "" && l.Digest == gitsource.RunRefsDigest(cur) {
			p.unchanged = true
			return gitsource.WithBranches(cur, branches), nil
		}
		ledger, err := ledgerOf(p.repo.Status.RunRefs)
		if err != nil {
			return nil, err
		}
		if p.index, err = p.r.runIndex(ctx, p.repo); err != nil {
			return nil, &clusterError{err: err}
		}
		p.indexed = true
		out, cancels := gitsource.PreviousRunRefs(t.RunRefs(cur), t, ledger, p.index, t.RunRefs(t.Watched(prev)), false)
		p.cancels = cancels
		maps.Copy(out, branches)
		return out, nil
	}
}

// ran records that an event's ref has its run now.
func (p *runRefPoll) ran(ev gitsource.Event) {
	if ev.Kind != gitsource.KindRunTag && ev.Kind != gitsource.KindRunRef || !p.indexed {
		return
	}
	p.index.Ran[gitsource.RunKey(ev.Ref, refObject(ev))] = true
}

// record is the ledger after the poll that saw refs.
func (p *runRefPoll) record(refs gitsource.RefSet, t gitsource.Triggers) *taugridv1.RunRefLedger {
	if p.unchanged && p.repo.Status.RunRefs != nil {
		return p.repo.Status.RunRefs
	}
	runRefs := t.RunRefs(refs)
	l := gitsource.RecordRunRefs(runRefs, p.index)
	return &taugridv1.RunRefLedger{Digest: l.Digest, Count: len(runRefs), Unrun: l.Unrun.Encode()}
}

func ledgerOf(l *taugridv1.RunRefLedger) (gitsource.Ledger, error) {
	if l == nil {
		return gitsource.Ledger{}, nil
	}
	fps, err := gitsource.DecodeFingerprints(l.Unrun)
	return gitsource.Ledger{Digest: l.Digest, Unrun: fps}, err
}

// runIndex reads which run refs of the repository have a TauRun, and which
// of those runs still go.
func (r *RepositoryReconciler) runIndex(ctx context.Context, repo *taugridv1.TauRepository) (gitsource.RunIndex, error) {
	var runs taugridv1.TauRunList
	if err := r.List(ctx, &runs, client.InNamespace(repo.Namespace), client.MatchingLabels{render.LabelRepository: repo.Name}); err != nil {
		return gitsource.RunIndex{}, err
	}
	ix := gitsource.RunIndex{Ran: make(map[string]bool, len(runs.Items))}
	for i := range runs.Items {
		run := &runs.Items[i]
		k := run.Spec.Trigger.Kind
		if k != taugridv1.TriggerRunTag && k != taugridv1.TriggerRunRef {
			continue
		}
		obj := run.Annotations[AnnotationRefObject]
		if obj == "" {
			ix.Ran[gitsource.RunKey(run.Spec.Trigger.Ref, run.Spec.Commit)] = true
		} else {
			ix.Ran[gitsource.RunKey(run.Spec.Trigger.Ref, obj)] = true
		}
		if !run.Spec.Cancel && !run.Status.Phase.Final() {
			ix.Live = append(ix.Live, gitsource.RunTrigger{Ref: run.Spec.Trigger.Ref, Object: obj, Commit: run.Spec.Commit})
		}
	}
	return ix, nil
}

// refObject is the object an event's ref names: its annotated tag, or the
// commit.
func refObject(ev gitsource.Event) string {
	if ev.Tag != "" {
		return ev.Tag
	}
	return ev.Commit
}

// clusterError is a failure of the API server met during a poll (listing
// the repository's TauRuns), not of git: transient, and said as such, not
// as the remote being unavailable.
type clusterError struct{ err error }

func (e *clusterError) Error() string { return "reading the repository's runs: " + e.err.Error() }
func (e *clusterError) Unwrap() error { return e.err }
