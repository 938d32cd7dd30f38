package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/render"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// runLimits are what a run's plan says of its attempts besides their
// objects: the queue and start deadlines, the preemption cap and the retry
// policy.
type runLimits struct {
	MaxQueueTime   time.Duration
	StartDeadline  time.Duration
	MaxPreemptions *int
	Retry          render.RetryPolicy
}

// plannedLimits are a run's limits and the commit of the policy they were
// resolved under. The run's commit, tau file and overrides are immutable,
// so nothing else can change them.
type plannedLimits struct {
	policy string
	limits runLimits
}

// errUnplannable: the run's tau file or the policy in force no longer
// resolves, or its repository or the policy is gone. No limit applies to
// the attempt it has; its next submission fails it and says why.
var errUnplannable = errors.New("the run cannot be planned")

// limits are the run's limits under the policy in force. They are
// resolved once per (run, policy commit) and kept, so a queued or running
// run's deadlines cost a read of its repository and platform from the
// cache, not its tau file from git and a render, at every look
// (errUnplannable when it cannot be planned; any other error may pass).
func (r *RunReconciler) limits(ctx context.Context, run *taugridv1.TauRun) (runLimits, error) {
	repo := &taugridv1.TauRepository{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo); err != nil {
		return runLimits{}, unplannable(fmt.Errorf("repository %s: %w", run.Spec.Repository, err))
	}
	_, commit, err := r.Policies.Policy(ctx, repo.Spec.Platform)
	if err != nil {
		return runLimits{}, unplannable(err)
	}
	memo := shared.MemoOf(&r.planned)
	if got, ok := memo.Get(run.UID); ok && got.policy == commit {
		return got.limits, nil
	}
	plan, _, err := r.resolve(ctx, run, len(run.Status.Attempts)+1, false)
	if err != nil {
		return runLimits{}, unplannable(err)
	}
	l := runLimits{MaxQueueTime: plan.MaxQueueTime, StartDeadline: plan.StartDeadline,
		MaxPreemptions: plan.MaxPreemptions, Retry: plan.Retry}
	memo.Put(run.UID, plannedLimits{policy: commit, limits: l})
	return l, nil
}

// forgetLimits drops the ended run's limits.
func (r *RunReconciler) forgetLimits(run *taugridv1.TauRun) {
	shared.MemoOf(&r.planned).Forget(run.UID)
}

// unplannable marks err as errUnplannable when it says the run cannot be
// planned at all, as opposed to an API server or git remote that may
// answer later.
func unplannable(err error) error {
	if len(render.Errors(err)) > 0 || errors.Is(err, gitsource.ErrNotFound) ||
		errors.Is(err, policy.ErrNoPolicyYet) || apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", errUnplannable, err)
	}
	return err
}
