package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// recovery is `make demo-recovery`: a low-priority Ray run fills the team's
// GPUs (its own 8 and 8 borrowed); a high-priority run arrives; Kueue
// preempts the Ray run, TauGrid ends its attempt as Preempted, naming the
// preemptor, and retries it after the backoff as attempt 2, which resumes
// from the run's latest checkpoint once the high-priority run is done.
// (kwok never ends a Ray cluster's pods, so the Ray run keeps running until
// the demo cancels it.)
func (d *demo) recovery(ctx context.Context) error {
	d.say("tau run ray --set policy.priority=low  (16 GPUs: all of team-a's, 8 of them borrowed)")
	out, err := d.tauCmd(ctx, "run", "ray", "--set", "policy.priority=low", "--set", "resilience.max_retries=2",
		"--set", "resilience.backoff.initial=5s") // Preempted is retried by default
	if err != nil {
		return err
	}
	low := runIDOf(out)
	if err := d.waitPhase(ctx, low, func(r *taugridv1.TauRun) bool { return r.Status.Phase == taugridv1.PhaseRunning }); err != nil {
		return err
	}
	d.say("tau run --set policy.priority=high ...  (8 more GPUs, which only preemption can free)")
	out, err = d.tauCmd(ctx, "run", "--set", "policy.priority=high", "--set", "policy.profile=h200-8", "--set", "compute.gpus=8")
	if err != nil {
		return err
	}
	high := runIDOf(out)
	d.say("following the low-priority run %s", low)
	if err := d.waitPhase(ctx, low, func(r *taugridv1.TauRun) bool {
		return len(r.Status.Attempts) == 2 && (r.Status.Phase == taugridv1.PhaseRunning || r.Status.Phase == taugridv1.PhaseAdmitted)
	}); err != nil {
		return err
	}
	if _, err := d.tauCmd(ctx, "status", "-w", high); err != nil {
		return err
	}
	d.say("tau status %s", low)
	if _, err := d.tauCmd(ctx, "status", low); err != nil {
		return err
	}
	d.say("tau cancel %s", low)
	if _, err := d.tauCmd(ctx, "cancel", low); err != nil {
		return err
	}
	return d.waitPhase(ctx, low, func(r *taugridv1.TauRun) bool { return r.Status.Phase == taugridv1.PhaseCancelled })
}

// waitPhase prints a run's phase changes until done says so.
func (d *demo) waitPhase(ctx context.Context, id string, done func(*taugridv1.TauRun) bool) error {
	last := ""
	return d.poll(ctx, 3*time.Minute, func() (bool, string, error) {
		var list taugridv1.TauRunList
		err := d.k8s.List(ctx, &list, client.InNamespace("team-a"),
			client.MatchingLabels{taugridv1.LabelRefHash: runs.RefHash(taugridv1.RunRefPrefix + id)})
		if err != nil || len(list.Items) == 0 {
			return false, "", err
		}
		r := &list.Items[0]
		line := fmt.Sprintf("run %s, attempt %d: %s", id, len(r.Status.Attempts), strings.ToLower(string(r.Status.Phase)))
		if msg := r.Status.Message; msg != "" && !strings.EqualFold(msg, string(r.Status.Phase)) {
			line += " (" + msg + ")"
		}
		if line != last {
			last = line
			d.say("%s", line)
		}
		if r.Status.Phase == taugridv1.PhaseFailed {
			return false, "", fmt.Errorf("run %s failed: %s", id, r.Status.Message)
		}
		return done(r), "", nil
	})
}
