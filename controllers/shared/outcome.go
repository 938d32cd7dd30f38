package shared

import (
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A reconcile ends in one of three ways, each handled in one place
// (finish) rather than at every call site:
//
//   - done or stalled (a terminalError): the generation was handled; what
//     a human must change is in the Stalled or Ready condition, and the
//     object is looked at again at its interval, not with backoff;
//   - waiting (a waitingError): nothing failed, something is not there
//     yet; look again after a while, and the generation is not handled;
//   - any other error is transient: retried with the controller's backoff,
//     and the generation is not handled.
//
// Only a handled generation is recorded in status.observedGeneration, so a
// reconcile that failed half way is done again in full, not taken for done.

// terminalError is a failure that retrying cannot mend.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as one a human must act on; nil stays nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// waitingError is a wait for something not there yet.
type waitingError struct {
	err   error
	after time.Duration
}

func (e *waitingError) Error() string { return e.err.Error() }
func (e *waitingError) Unwrap() error { return e.err }

// Waiting says the reconcile waits for err's cause, looking again after.
func Waiting(after time.Duration, err error) error {
	return &waitingError{err: err, after: after}
}

// Handled reports whether a reconcile that ended with err handled its
// generation: it succeeded or stalled.
func Handled(err error) bool {
	var t *terminalError
	return err == nil || errors.As(err, &t)
}

// Finish turns how a reconcile ended into controller-runtime's result:
// res for done and stalled ones, a requeue for waiting ones, and the error
// (with backoff) for transient ones.
func Finish(res reconcile.Result, err error) (reconcile.Result, error) {
	var w *waitingError
	switch {
	case Handled(err):
		return res, nil
	case errors.As(err, &w):
		return reconcile.Result{RequeueAfter: w.after}, nil
	}
	return reconcile.Result{}, err
}
