package shared

import (
	"context"
	"fmt"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestARunIsHeldByOneWriterAtATime: while one controller holds a run,
// another's TryHold fails and its Hold waits until the run is let go;
// other runs are not held; letting go twice is harmless.
func TestARunIsHeldByOneWriterAtATime(t *testing.T) {
	var w Written
	key := client.ObjectKeyFromObject(runAt("r", "1"))
	release, ok := w.TryHold(key)
	if !ok {
		t.Fatal("a run no one holds could not be held")
	}
	if _, ok := w.TryHold(key); ok {
		t.Fatal("a held run was held again")
	}
	if other, ok := w.TryHold(client.ObjectKeyFromObject(runAt("other", "1"))); !ok {
		t.Fatal("holding one run held another")
	} else {
		other()
	}
	got := make(chan func())
	go func() {
		r, err := w.Hold(context.Background(), key)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("Hold did not wait for the holder")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	release()
	select {
	case r := <-got:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("Hold still waits after the run was let go")
	}
	if r, ok := w.TryHold(key); !ok {
		t.Error("the run is still held after both let it go")
	} else {
		r()
	}
}

// TestGuardRefusesAsTheAPIServerWould: a write from a copy a write of the
// process replaced, or one that waited out its context for the holder,
// fails with a Conflict and sends nothing; the run is not left held.
func TestGuardRefusesAsTheAPIServerWould(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var w Written
	w.Note(runAt("r", "11"), "10", now)
	if _, err := w.Guard(context.Background(), runAt("r", "10"), now); !apierrors.IsConflict(err) {
		t.Errorf("a copy a write replaced: %v, want a Conflict", err)
	}
	release, err := w.Guard(context.Background(), runAt("r", "11"), now)
	if err != nil {
		t.Fatalf("the current copy: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Guard(ctx, runAt("r", "11"), now); !apierrors.IsConflict(err) {
		t.Errorf("while another holds the run: %v, want a Conflict", err)
	}
	release()
	if r, ok := w.TryHold(client.ObjectKeyFromObject(runAt("r", "11"))); !ok {
		t.Error("a refused Guard left the run held")
	} else {
		r()
	}
}

// TestAWritersOwnCopyKeepsTheRecord: a controller that writes a run twice
// in a row guards its second write with the copy its first stored; the
// cache may still hold the copy before both, which must still lag.
func TestAWritersOwnCopyKeepsTheRecord(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var w Written
	w.Note(runAt("r", "11"), "10", now)
	release, err := w.Guard(context.Background(), runAt("r", "11"), now)
	if err != nil {
		t.Fatal(err)
	}
	w.Note(runAt("r", "12"), "11", now)
	release()
	if !w.Lags(runAt("r", "10"), now) {
		t.Error("the copy before both writes is taken for current after the writer guarded its second write")
	}
}

// TestAWriteFromAnOlderCopyAlsoReplacesThePreviousWrite: the forge's
// unlocked patch, computed from its copy at 10 after the run reconciler's
// write stored 11, replaces 11 as well: a copy at 11 lags once the forge's
// write (12) is recorded, so no locked patch is computed from it.
func TestAWriteFromAnOlderCopyAlsoReplacesThePreviousWrite(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var w Written
	w.Note(runAt("r", "11"), "10", now) // the run reconciler, from 10
	w.Note(runAt("r", "12"), "10", now) // the forge, unlocked, from its copy at 10
	for _, rv := range []string{"10", "11"} {
		if !w.Lags(runAt("r", rv), now) {
			t.Errorf("the copy at %s, which the writes replaced, is taken for current", rv)
		}
	}
	if w.Lags(runAt("r", "12"), now) {
		t.Error("the copy the last write stored is taken for one that lags")
	}
}
