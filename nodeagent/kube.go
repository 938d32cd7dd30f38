package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Kubernetes API retries: a few attempts, backing off, for errors that can heal.
const (
	apiAttempts    = 4
	apiBackoff     = 100 * time.Millisecond
	eventNamespace = metav1.NamespaceDefault // where Node events live
	conflictTries  = 5
)

// kube is the agent's view of its own Node, and the only writer to it.
type kube struct {
	client   kubernetes.Interface
	name     string
	timeout  time.Duration
	selector string // label selector of GPU nodes, for the circuit breaker
	clock    clock.Clock
	m        *Metrics

	node *corev1.Node // as last read or written
}

// do runs one API operation with a deadline per attempt, retrying transient
// errors with backoff, and counts it.
func (k *kube) do(ctx context.Context, op string, fn func(context.Context) error) error {
	var err error
	backoff := apiBackoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, k.timeout)
		err = fn(actx)
		cancel()
		k.m.api.WithLabelValues(op, result(err)).Inc()
		if err == nil || !transient(err) || attempt == apiAttempts || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-k.clock.After(backoff):
		}
		backoff *= 2
	}
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return string(reason)
	}
	return "error"
}

// transient: the error may go away if the request is repeated.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer from the server: network, deadline
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// get reads the node.
func (k *kube) get(ctx context.Context) error {
	return k.do(ctx, "get", func(ctx context.Context) error {
		n, err := k.client.CoreV1().Nodes().Get(ctx, k.name, metav1.GetOptions{})
		if err == nil {
			k.node = n
		}
		return err
	})
}

// patchCondition writes one condition, leaving the others (merged by type).
func (k *kube) patchCondition(ctx context.Context, c corev1.NodeCondition) error {
	return k.patchStatus(ctx, map[string]any{"conditions": []corev1.NodeCondition{c}})
}

// patchStatus merges status into the node's status.
func (k *kube) patchStatus(ctx context.Context, status map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return k.do(ctx, "patch-status", func(ctx context.Context) error {
		n, err := k.client.CoreV1().Nodes().Patch(ctx, k.name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
		if err == nil {
			k.node = n
		}
		return err
	})
}

// advertiseHostSlot makes the node offer one taugridv1.ResourceHostSlot,
// in capacity and allocatable, unless it does already: each pod of a
// multi-node run on a TAS flavor asks one, so that Kueue's topology
// assignment, like kube-scheduler, puts at most one on a host. The kubelet
// keeps an extended resource written this way; a node whose status lost it
// gets it back at the next sync.
func (k *kube) advertiseHostSlot(ctx context.Context) error {
	one := resource.MustParse("1")
	c, a := k.node.Status.Capacity[taugridv1.ResourceHostSlot], k.node.Status.Allocatable[taugridv1.ResourceHostSlot]
	if c.Cmp(one) == 0 && a.Cmp(one) == 0 {
		return nil
	}
	slot := map[string]string{taugridv1.ResourceHostSlot: "1"}
	return k.patchStatus(ctx, map[string]any{"capacity": slot, "allocatable": slot})
}

// specChange is a change to the node's taints and the agent's annotation.
type specChange struct {
	taint      *bool   // add (true) or remove (false) the agent's taint
	annotation *string // the state annotation's new value
}

// patchSpec applies c with the resourceVersion as a precondition (taints are a
// list patched whole), reading the node again after a conflict.
func (k *kube) patchSpec(ctx context.Context, c specChange) error {
	for try := 1; ; try++ {
		body, changed, err := specPatch(k.node, c)
		if err != nil || !changed {
			return err
		}
		err = k.do(ctx, "patch", func(ctx context.Context) error {
			n, err := k.client.CoreV1().Nodes().Patch(ctx, k.name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
			if err == nil {
				k.node = n
			}
			return err
		})
		if !apierrors.IsConflict(err) || try == conflictTries {
			return err
		}
		if err := k.get(ctx); err != nil {
			return err
		}
	}
}

// specPatch builds the patch for c against node; changed is false when node
// already is as c wants.
func specPatch(node *corev1.Node, c specChange) (body []byte, changed bool, err error) {
	meta := map[string]any{"resourceVersion": node.ResourceVersion}
	patch := map[string]any{"metadata": meta}
	if c.annotation != nil && node.Annotations[AnnotationState] != *c.annotation {
		meta["annotations"] = map[string]string{AnnotationState: *c.annotation}
		changed = true
	}
	if c.taint != nil && *c.taint != hasTaint(node) {
		taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), ours)
		if *c.taint {
			taints = append(taints, corev1.Taint{Key: TaintKey, Effect: TaintEffect})
		}
		patch["spec"] = map[string]any{"taints": taints}
		changed = true
	}
	if !changed {
		return nil, false, nil
	}
	body, err = json.Marshal(patch)
	return body, true, err
}

func ours(t corev1.Taint) bool { return t.Key == TaintKey && t.Effect == TaintEffect }

// hasTaint: the node carries the agent's taint.
func hasTaint(n *corev1.Node) bool { return n != nil && slices.ContainsFunc(n.Spec.Taints, ours) }

// gpuNodes lists the GPU nodes for the circuit breaker.
func (k *kube) gpuNodes(ctx context.Context) ([]GPUNode, error) {
	var list *corev1.NodeList
	err := k.do(ctx, "list", func(ctx context.Context) error {
		var err error
		list, err = k.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: k.selector, ResourceVersion: "0"})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]GPUNode, 0, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		g := GPUNode{Name: n.Name, Tainted: hasTaint(n)}
		if p, err := decodePersisted(n.Annotations[AnnotationState]); err == nil && p.TaintedAt != nil {
			g.TaintedAt = *p.TaintedAt
		}
		out = append(out, g)
	}
	return out, nil
}

// event records a Kubernetes Event on the node. Failures are returned for the
// caller to log: an Event is never worth failing a cycle for.
func (k *kube) event(ctx context.Context, eventType, reason, message string) error {
	now := metav1.NewTime(k.clock.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%s", k.name, strconv.FormatInt(now.UnixNano(), 16)),
			Namespace: eventNamespace,
		},
		InvolvedObject:      k.nodeRef(),
		Reason:              reason,
		Message:             truncate(message, 1024),
		Type:                eventType,
		Source:              corev1.EventSource{Component: component, Host: k.name},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "taugrid.dev/" + component,
		ReportingInstance:   component + "-" + k.name,
	}
	return k.do(ctx, "create-event", func(ctx context.Context) error {
		_, err := k.client.CoreV1().Events(eventNamespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
}

func (k *kube) nodeRef() corev1.ObjectReference {
	ref := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: k.name}
	if k.node != nil {
		ref.UID = k.node.UID
	}
	return ref
}

// component names the agent in Events.
const component = "tau-nodeagent"

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
