package shared

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheLag is how soon a run whose cached copy lags a status write of
// this process is looked at again: the cache mostly catches up within
// tens of milliseconds.
const CacheLag = 50 * time.Millisecond

// WokenByTheWrite is how soon a controller that every change of a run
// wakes (the forge's, the notifications': For(&TauRun{}) with no
// predicate), finding its cached copy lagging a status write of this
// process, looks at the run again by itself: the write's own watch event
// wakes it as soon as the cache shows the write, so this is only for an
// event that never comes. Looking again every CacheLag instead, the
// forge's controller reconciled a run 16.3 times by the 500th run ended
// against 13.7 with this (hack/scale, 1,000 runs, one run each; the
// notifications' 13.4 either way).
const WokenByTheWrite = 5 * time.Second

// writtenTTL ends the wait for writes whose copy the cache never shows.
const writtenTTL = 30 * time.Second

// maxReplaced bounds the copies remembered as replaced, per run: a
// reconcile writes once or twice (the forge: its post in flight, then
// what the forge took).
const maxReplaced = 8

// Written is this process's record of its status writes to runs. Every
// controller that writes a run's status (the run's, the forge's, the
// evidence's, the notifications') shares one. A write's watch event
// reaches each controller's cache a moment later; meanwhile a pod or
// Workload event, or the write's own event in another controller, finds a
// copy the write replaced. A locked patch computed from it is refused
// (409) after the API server has read and patched the stored object: work
// for nothing, and for the evidence a whole seal done again. hack/scale:
// 3.65 refused TauRun patches per run ended when no controller knew its
// writes, 0.17-0.19 when the run reconciler knew its own.
//
// A record alone leaves a race: another controller's write that lands
// between a reconcile's read of its copy and its patch. The first look at
// a new run was one (the forge recording the post of its first state while
// the run reconciler created the run's Job): the run's write refused, then
// its Job and NetworkPolicy created again and refused as they existed.
// So each writer also holds the run while it writes (TryHold, Guard,
// HoldWrite): the run reconciler from its read to its patch, the others,
// whose copies are older than their writes, for the check that their copy
// is current and the patch.
type Written struct {
	mu    sync.Mutex
	runs  map[types.NamespacedName]*written
	held  map[types.NamespacedName]chan struct{} // closed when let go
	notes int
}

// written is what one run's writes replaced and stored.
type written struct {
	replaced []string // resourceVersions replaced, oldest first
	latest   string   // the resourceVersion the last write stored
	at       time.Time
}

var writtenInit sync.Mutex

// WrittenOf returns *p, created on first use: a reconciler built as a
// struct literal (as tests build them) keeps a record of its own.
func WrittenOf(p **Written) *Written {
	writtenInit.Lock()
	defer writtenInit.Unlock()
	if *p == nil {
		*p = &Written{}
	}
	return *p
}

// Note records a status write that replaced the copy at resourceVersion
// replaced with run, at now. A write the API server stored nothing for (a
// time that differs only below the second it keeps) leaves the
// resourceVersion as it was: the cache already shows that copy, so there
// is nothing to wait for.
func (w *Written) Note(run client.Object, replaced string, now time.Time) {
	if run.GetResourceVersion() == replaced {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs == nil {
		w.runs = map[types.NamespacedName]*written{}
	}
	key := client.ObjectKeyFromObject(run)
	last := w.runs[key]
	if last == nil || now.Sub(last.at) >= writtenTTL {
		last = &written{}
		w.runs[key] = last
	}
	last.replaced = append(last.replaced, replaced)
	// The write replaced what the API server held just before it too: the
	// copy this process's previous write stored, when it came from an
	// older copy than that (the forge's unlocked patch, computed from its
	// own copy). Left out, a reconcile whose cache showed the previous
	// write took it for current, and its locked patch was refused (409).
	if prev := last.latest; prev != "" && prev != replaced && prev != run.GetResourceVersion() && !slices.Contains(last.replaced, prev) {
		last.replaced = append(last.replaced, prev)
	}
	if n := len(last.replaced); n > maxReplaced {
		last.replaced = slices.Delete(last.replaced, 0, n-maxReplaced)
	}
	last.latest, last.at = run.GetResourceVersion(), now
	// Runs whose writes no reconcile looks at again (ended, sealed) are
	// swept now and then.
	if w.notes++; w.notes%1024 == 0 {
		for k, v := range w.runs {
			if now.Sub(v.at) >= writtenTTL {
				delete(w.runs, k)
			}
		}
	}
}

// Lags reports a run whose copy is one that this process's writes to it
// replaced: the writes have not reached the cache yet. The copy the last
// write stored ends the wait, as does the last write growing older than
// writtenTTL with the cache never showing it.
func (w *Written) Lags(run client.Object, now time.Time) bool {
	return w.lags(run, now, true)
}

// lags is Lags; forget drops the record once a copy shows the last write
// (a copy read from the cache: the cache shows no older one after it).
// A writer's own copy, just written, shows it too, while the cache may
// still lag: Guard keeps the record.
func (w *Written) lags(run client.Object, now time.Time, forget bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(run)
	last, ok := w.runs[key]
	switch {
	case !ok:
		return false
	case now.Sub(last.at) >= writtenTTL || run.GetResourceVersion() == last.latest:
		if forget {
			delete(w.runs, key)
		}
		return false
	}
	return slices.Contains(last.replaced, run.GetResourceVersion())
}

// Forget drops what is recorded of a run (gone from the cluster).
func (w *Written) Forget(run types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.runs, run)
}

// TryHold holds run's status for the caller, unless another holds it;
// release lets it go.
func (w *Written) TryHold(run types.NamespacedName) (release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, held := w.held[run]; held {
		return nil, false
	}
	return w.holdLocked(run), true
}

// Hold holds run's status for the caller, waiting for another holder to
// let it go; it fails only when ctx ends first.
func (w *Written) Hold(ctx context.Context, run types.NamespacedName) (release func(), err error) {
	for {
		w.mu.Lock()
		ch, held := w.held[run]
		if !held {
			defer w.mu.Unlock()
			return w.holdLocked(run), nil
		}
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (w *Written) holdLocked(run types.NamespacedName) func() {
	if w.held == nil {
		w.held = map[types.NamespacedName]chan struct{}{}
	}
	ch := make(chan struct{})
	w.held[run] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.held, run)
			w.mu.Unlock()
			close(ch)
		})
	}
}

// MaxHoldWait bounds how long Guard waits for another writer of the run:
// the run reconciler holds a run for one reconcile, its creates and its
// status patch (under a second on a busy API server).
const MaxHoldWait = 10 * time.Second

// HoldWrite holds run's status for a write that does not depend on the
// copy it is computed from (a merge patch of a field only the caller
// writes, with no lock), waiting up to MaxHoldWait for another writer; it
// fails with a Conflict when the run stays held that long.
func (w *Written) HoldWrite(ctx context.Context, run client.Object) (release func(), err error) {
	hctx, cancel := context.WithTimeout(ctx, MaxHoldWait)
	defer cancel()
	release, err = w.Hold(hctx, client.ObjectKeyFromObject(run))
	if err != nil {
		return nil, apierrors.NewConflict(taugridv1.GroupVersion.WithResource("tauruns").GroupResource(), run.GetName(),
			fmt.Errorf("another controller of this process is writing it: %w", err))
	}
	return release, nil
}

// Guard holds run's status for a write computed from the copy run, for a
// controller whose copy was read before it held the run (the forge's, the
// evidence's, the notifications'). It fails with a Conflict, as the API
// server would without the request sent, when the copy is one a write of
// this process replaced (as Lags, the record kept), or when the run stays
// held MaxHoldWait.
func (w *Written) Guard(ctx context.Context, run client.Object, now time.Time) (release func(), err error) {
	release, err = w.HoldWrite(ctx, run)
	if err != nil {
		return nil, err
	}
	if w.lags(run, now, false) {
		release()
		return nil, apierrors.NewConflict(taugridv1.GroupVersion.WithResource("tauruns").GroupResource(), run.GetName(),
			errors.New("the copy is older than a write of this process"))
	}
	return release, nil
}
