package shared

import (
	"fmt"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func runAt(name, rv string) *taugridv1.TauRun {
	return &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, ResourceVersion: rv}}
}

// TestACopyAnyWriteOfTheProcessReplacedLags: the copies that the
// process's writes to a run replaced lag, whichever controller wrote; the
// copy the last write stored, and only it, ends the wait; a copy the
// process never wrote over does not lag.
func TestACopyAnyWriteOfTheProcessReplacedLags(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var w Written
	// The run reconciler writes 10 -> 11; the forge records its post in
	// flight on 11 -> 12 and then what the forge took, 12 -> 13.
	w.Note(runAt("r", "11"), "10", now)
	w.Note(runAt("r", "12"), "11", now)
	w.Note(runAt("r", "13"), "12", now)
	for _, rv := range []string{"10", "11", "12"} {
		if !w.Lags(runAt("r", rv), now) {
			t.Errorf("the copy at %s, which a write replaced, is taken for current", rv)
		}
	}
	if w.Lags(runAt("r", "9"), now) || w.Lags(runAt("other", "10"), now) {
		t.Error("a copy no write of the process replaced is taken for one that lags")
	}
	if w.Lags(runAt("r", "13"), now) {
		t.Error("the copy the last write stored is taken for one that lags")
	}
	if w.Lags(runAt("r", "12"), now) {
		t.Error("once the cache showed the last write, an older copy still waits: the record was kept")
	}
}

// TestAWriteThatStoredNothingOrLongAgoHoldsNothingBack: a patch the API
// server stored nothing for keeps the resourceVersion, which the cache
// already shows; a write older than writtenTTL whose copy the cache
// never showed stops the wait; a run forgotten waits for nothing.
func TestAWriteThatStoredNothingOrLongAgoHoldsNothingBack(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var w Written
	w.Note(runAt("same", "7"), "7", now)
	if w.Lags(runAt("same", "7"), now) {
		t.Error("a write that stored nothing holds its own copy back")
	}
	w.Note(runAt("old", "8"), "7", now)
	if !w.Lags(runAt("old", "7"), now.Add(writtenTTL-time.Millisecond)) {
		t.Error("the replaced copy stopped lagging before writtenTTL")
	}
	if w.Lags(runAt("old", "7"), now.Add(writtenTTL)) {
		t.Error("a write the cache never showed holds the run back past writtenTTL")
	}
	w.Note(runAt("gone", "8"), "7", now)
	w.Forget(client.ObjectKeyFromObject(runAt("gone", "")))
	if w.Lags(runAt("gone", "7"), now) {
		t.Error("a forgotten run still waits")
	}
}

// TestTheRecordStaysBounded: each run keeps its last maxReplaced copies,
// and runs no reconcile looks at again are swept once their writes are
// older than writtenTTL.
func TestTheRecordStaysBounded(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var w Written
	for i := range maxReplaced + 2 {
		w.Note(runAt("busy", fmt.Sprint(i+1)), fmt.Sprint(i), now)
	}
	if got := len(w.runs[client.ObjectKeyFromObject(runAt("busy", ""))].replaced); got != maxReplaced {
		t.Errorf("%d copies kept for one run, want %d", got, maxReplaced)
	}
	if w.Lags(runAt("busy", "0"), now) || !w.Lags(runAt("busy", "2"), now) {
		t.Error("not the latest copies kept")
	}
	for i := range 1024 {
		w.Note(runAt(fmt.Sprint("ended-", i), "2"), "1", now)
	}
	later := now.Add(writtenTTL)
	for i := range 1024 {
		w.Note(runAt("busy", fmt.Sprint(100+i)), fmt.Sprint(99+i), later)
	}
	if n := len(w.runs); n != 1 {
		t.Errorf("%d runs recorded after a sweep, want the 1 written within writtenTTL", n)
	}
}
