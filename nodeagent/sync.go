package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncBudget bounds one sync to this many API timeouts, so that an unreachable
// API server slows the loop down but never stops it.
const syncBudget = 3

// syncOutcome is what the last sync did or would do, for the report.
type syncOutcome struct {
	Condition *corev1.NodeCondition `json:"condition,omitempty"` // written (nil: unchanged)
	Taint     string                `json:"taint"`               // added, removed, kept, none, withheld
	Breaker   *BreakerDecision      `json:"breaker,omitempty"`
	Withheld  string                `json:"withheld,omitempty"`
	Wrote     bool                  `json:"wrote"`
	Err       string                `json:"error,omitempty"`
}

// adoptNode reads the node and the state a previous agent left on it, once.
// Faults are adopted whatever the boot (the boot change is their evidence of
// recovery); the GPU list only within the same boot, since GPUs may have been
// replaced since. Until it succeeds the agent writes nothing, so that it cannot
// overwrite a fault it has not read.
func (a *Agent) adoptNode(ctx context.Context) error {
	if a.kube == nil || a.adopted {
		return nil
	}
	if err := a.kube.get(ctx); err != nil {
		return fmt.Errorf("reading node %s: %w", a.cfg.NodeName, err)
	}
	a.adopted = true
	p, err := decodePersisted(a.kube.node.Annotations[AnnotationState])
	if err != nil {
		a.log.Error(err, "ignoring a malformed state annotation", "annotation", AnnotationState)
		return nil
	}
	for _, f := range p.Faults {
		if !slices.ContainsFunc(a.state.Faults, func(g Fault) bool { return g.key() == f.key() }) {
			a.state.Faults = append(a.state.Faults, f)
		}
	}
	if boot, err := a.bootID(); err == nil && boot == p.BootID {
		for uuid, i := range p.GPUs {
			if _, ok := a.known[uuid]; !ok {
				a.known[uuid] = i
			}
		}
	}
	a.verdict = VerdictFor(a.state, a.results)
	return nil
}

// refreshNode reads the node again, repairing whatever was changed under us.
func (a *Agent) refreshNode(ctx context.Context) {
	if a.kube == nil {
		return
	}
	if err := a.kube.get(ctx); err != nil {
		a.log.Error(err, "reading the node", "node", a.cfg.NodeName)
		return
	}
	a.evaluate() // a reset acknowledgement may have appeared
}

// sync makes the node say what the verdict says, writing only what differs.
func (a *Agent) sync(ctx context.Context) {
	if a.kube == nil || a.cfg.DryRun {
		a.last = a.plan(ctx, a.kube != nil)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, syncBudget*a.cfg.APITimeout)
	defer cancel()
	if err := a.adoptNode(ctx); err != nil {
		a.last = syncOutcome{Err: err.Error()}
		a.log.Error(err, "will retry")
		return
	}
	a.last = a.apply(ctx)
	if a.last.Err != "" {
		a.log.Info("updating the node failed; will retry", "error", a.last.Err)
	}
}

// plan works out what sync would write without writing; with readNode it reads
// the node first (dry-run), else it plans against an empty node.
func (a *Agent) plan(ctx context.Context, readNode bool) syncOutcome {
	node := &corev1.Node{}
	if readNode {
		if err := a.adoptNode(ctx); err != nil {
			return syncOutcome{Err: err.Error()}
		}
		node = a.kube.node
	}
	out := syncOutcome{Taint: taintAction(hasTaint(node), a.verdict.Taint)}
	if out.Taint == "added" && readNode {
		out.Breaker = a.breaker(ctx)
		if out.Breaker != nil && !out.Breaker.Allow {
			out.Taint, out.Withheld = "withheld", "taint withheld: "+out.Breaker.Message
		}
	}
	out.Condition = desiredCondition(node, a.verdict, out.Withheld, a.clock.Now())
	return out
}

// apply writes the condition, then the taint and state, then the Events.
func (a *Agent) apply(ctx context.Context) syncOutcome {
	node := a.kube.node
	has := hasTaint(node)
	out := syncOutcome{Taint: taintAction(has, a.verdict.Taint)}
	want := a.verdict.Taint
	if out.Taint == "added" {
		out.Breaker = a.breaker(ctx)
		if !out.Breaker.Allow {
			want, out.Taint, out.Withheld = false, "withheld", "taint withheld: "+out.Breaker.Message
		}
	}
	a.setBreakerOpen(ctx, out.Withheld)
	old := findCondition(node)
	var errs []error
	if out.Condition = desiredCondition(node, a.verdict, out.Withheld, a.clock.Now()); out.Condition != nil {
		if err := a.kube.patchCondition(ctx, *out.Condition); err != nil {
			errs = append(errs, fmt.Errorf("writing the condition: %w", err))
			out.Condition = nil
		} else {
			out.Wrote = true
		}
	}
	if err := a.kube.advertiseHostSlot(ctx); err != nil {
		errs = append(errs, fmt.Errorf("advertising the host slot: %w", err))
	}
	annotation := a.persisted(has, want).encode()
	change := specChange{annotation: &annotation}
	if want != has {
		change.taint = &want
	}
	if err := a.kube.patchSpec(ctx, change); err != nil {
		errs = append(errs, fmt.Errorf("writing the taint and state: %w", err))
		out.Taint = taintAction(has, has)
	} else if change.taint != nil {
		out.Wrote = true
		a.metrics.taints.WithLabelValues(out.Taint).Inc()
	}
	if err := errors.Join(errs...); err != nil {
		out.Err = err.Error()
	}
	a.recordEvents(ctx, old, out)
	a.recordXIDEvents(ctx)
	return out
}

// taintAction names the taint change from has to want.
func taintAction(has, want bool) string {
	switch {
	case want && !has:
		return "added"
	case !want && has:
		return "removed"
	case want:
		return "kept"
	}
	return "none"
}

// breaker asks the circuit breaker whether this node may be tainted; when the
// GPU nodes cannot be counted, the answer is no.
func (a *Agent) breaker(ctx context.Context) *BreakerDecision {
	nodes, err := a.kube.gpuNodes(ctx)
	if err != nil {
		return &BreakerDecision{Message: "cannot count the tainted GPU nodes: " + err.Error()}
	}
	d := BreakerAllows(a.cfg.Breaker, a.cfg.NodeName, nodes, a.clock.Now())
	return &d
}

// setBreakerOpen records the breaker opening (an Event) and closing.
func (a *Agent) setBreakerOpen(ctx context.Context, withheld string) {
	if withheld != "" && a.last.Withheld == "" {
		a.metrics.taints.WithLabelValues("withheld").Inc()
		a.warnEvent(ctx, corev1.EventTypeWarning, "CircuitBreakerOpen", a.verdict.Message+"; "+withheld)
	}
	a.metrics.breakerOpen.Set(boolGauge(withheld != ""))
}

// xidEventEvery bounds Events for one XID on one GPU (an application stuck in a
// loop can raise the same XID many times a second).
const xidEventEvery = time.Minute

// recordXIDEvents records an Event for each fatal or warning XID seen since the
// last sync, at most one per GPU and XID per xidEventEvery.
func (a *Agent) recordXIDEvents(ctx context.Context) {
	now := a.clock.Now()
	for _, e := range a.pendingXIDs {
		rule := a.cfg.XIDs.Classify(e.XID)
		if rule.Class == XIDIgnore {
			continue
		}
		k := xidKey{uuid: e.UUID, xid: e.XID}
		if last, ok := a.xidEvents[k]; ok && now.Sub(last) < xidEventEvery {
			continue
		}
		a.xidEvents[k] = now
		r := evaluateXIDs([]XIDEvent{e}, a.cfg.XIDs)[0]
		a.warnEvent(ctx, corev1.EventTypeWarning, r.Reason, describe(r)+"; action "+string(r.Action))
	}
	a.pendingXIDs = nil
}

// persisted is the state to keep on the node.
func (a *Agent) persisted(has, want bool) persisted {
	p := persisted{Faults: a.state.Faults, GPUs: a.known}
	p.BootID, _ = a.bootID()
	if want {
		old, _ := decodePersisted(a.kube.node.Annotations[AnnotationState])
		t := a.clock.Now().UTC().Truncate(time.Second)
		if has && old.TaintedAt != nil {
			t = *old.TaintedAt
		}
		p.TaintedAt = &t
	}
	return p
}

// findCondition returns the node's TauGPUHealthy condition, or nil.
func findCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// desiredCondition is the condition to write for v (with note appended to the
// message), or nil when the node already says exactly that. Pure.
func desiredCondition(n *corev1.Node, v Verdict, note string, now time.Time) *corev1.NodeCondition {
	msg := v.Message
	if note != "" {
		msg += "; " + note
	}
	msg = truncate(msg, 1024)
	old := findCondition(n)
	if old != nil && old.Status == v.Status && old.Reason == v.Reason && old.Message == msg {
		return nil
	}
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	c := &corev1.NodeCondition{Type: ConditionType, Status: v.Status, Reason: v.Reason, Message: msg,
		LastHeartbeatTime: t, LastTransitionTime: t}
	if old != nil && old.Status == v.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

// recordEvents records an Event when the condition's status or reason changed.
func (a *Agent) recordEvents(ctx context.Context, old *corev1.NodeCondition, out syncOutcome) {
	c := out.Condition
	if c == nil || (old != nil && old.Status == c.Status && old.Reason == c.Reason) {
		return
	}
	typ := corev1.EventTypeWarning
	if c.Status == corev1.ConditionTrue {
		typ = corev1.EventTypeNormal
	}
	msg := c.Message
	switch out.Taint {
	case "added", "removed":
		msg += "; taint " + TaintKey + ":" + string(TaintEffect) + " " + out.Taint
	}
	a.warnEvent(ctx, typ, c.Reason, msg)
}

// warnEvent records an Event, logging a failure.
func (a *Agent) warnEvent(ctx context.Context, typ, reason, msg string) {
	if err := a.kube.event(ctx, typ, reason, msg); err != nil {
		a.log.Error(err, "recording an Event", "reason", reason)
	}
}
