package run

import (
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taugrid/taugrid/controllers/shared"
)

// CacheLag is how soon a run whose cached copy lags this process's own
// status write is looked at again: the cache mostly catches up within
// tens of milliseconds.
const CacheLag = 50 * time.Millisecond

// write is, per run, the resourceVersion this process's last status write
// to it replaced (RunReconciler.wrote), and when. A pod or Workload event
// that comes right after the write finds the cache still holding the old
// copy; a patch computed from it is refused (409) after the API server
// has read and patched the stored object, work for nothing. hack/scale: 3.65
// refused TauRun patches per run ended, beside 7.3 stored writes.
type write struct {
	replaced string
	at       time.Time
}

// wrote remembers a status write that replaced the copy at resourceVersion
// replaced. The memo is keyed by name, so that a run deleted meanwhile is
// forgotten by its next reconcile (which finds it gone).
func (r *RunReconciler) wrote(run types.NamespacedName, replaced string) {
	shared.MemoOf(&r.writes).Put(run, write{replaced: replaced, at: r.Clock.Now()})
}

// CacheLagsWrite reports a run whose cached copy is the one this process
// last replaced: the write has not reached the cache yet. Any other copy
// (the write, or one written after it) ends the wait, as does a write
// older than submissionMemoTTL whose copy the cache never shows.
func (r *RunReconciler) CacheLagsWrite(run *taugridv1.TauRun) bool {
	writes := shared.MemoOf(&r.writes)
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	w, ok := writes.Get(key)
	switch {
	case !ok:
		return false
	case run.ResourceVersion == w.replaced && r.Clock.Now().Sub(w.at) < submissionMemoTTL:
		return true
	}
	writes.Forget(key)
	return false
}
