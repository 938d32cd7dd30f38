package runs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Bounds of a diagnosis: whatever the run did, it stays small enough to
// paste into an issue.
const (
	diagnoseMaxPods   = 8
	diagnoseMaxEvents = 50
	diagnoseTailLines = 50
	diagnoseTailBytes = 16 << 10
)

// LogSource opens a container's log, as the API server's pods/log does.
type LogSource interface {
	Logs(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// Diagnosis is everything needed to understand a run's failure, bounded
// and with every secret value masked.
type Diagnosis struct {
	SchemaVersion int                      `json:"schema_version"`
	Run           string                   `json:"run"`
	Namespace     string                   `json:"namespace"`
	Phase         taugridv1.RunPhase       `json:"phase"`
	Message       string                   `json:"message,omitempty"`
	Commit        string                   `json:"commit"`
	Target        string                   `json:"target"`
	Attempts      []taugridv1.Attempt      `json:"attempts,omitempty"`
	Conditions    []metav1.Condition       `json:"conditions,omitempty"`
	Kueue         []metav1.Condition       `json:"kueue,omitempty"`
	Pods          []PodDiagnosis           `json:"pods,omitempty"`
	Nodes         map[string]NodeDiagnosis `json:"nodes,omitempty"`
	Events        []EventDiagnosis         `json:"events,omitempty"`
	Truncated     []string                 `json:"truncated,omitempty"`
}

// PodDiagnosis is one pod of the run's current attempt.
type PodDiagnosis struct {
	Name       string                   `json:"name"`
	Node       string                   `json:"node,omitempty"`
	Phase      corev1.PodPhase          `json:"phase"`
	Reason     string                   `json:"reason,omitempty"`
	Containers []corev1.ContainerStatus `json:"containers,omitempty"`
	LogTail    string                   `json:"log_tail,omitempty"`
}

// NodeDiagnosis is the GPU health of a node the run used.
type NodeDiagnosis struct {
	Exists     bool   `json:"exists"`
	GPUHealthy string `json:"gpu_healthy,omitempty"`
	Message    string `json:"message,omitempty"`
}

// EventDiagnosis is one event about the run, its workloads or its pods.
type EventDiagnosis struct {
	Time    metav1.Time `json:"time"`
	Type    string      `json:"type"`
	Object  string      `json:"object"`
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
}

// Diagnose gathers a run's diagnosis: its status and attempts, Kueue's
// conditions, its pods with their exit codes and log tails, the GPU health
// of their nodes, and the events about all of them. Reads go through c;
// logs through logs, if set.
func Diagnose(ctx context.Context, c client.Reader, logs LogSource, run *taugridv1.TauRun) (*Diagnosis, error) {
	d := &Diagnosis{SchemaVersion: 1, Run: run.Name, Namespace: run.Namespace, Phase: run.Status.Phase, Message: run.Status.Message,
		Commit: run.Spec.Commit, Target: run.Spec.Target, Attempts: run.Status.Attempts, Conditions: run.Status.Conditions,
		Nodes: map[string]NodeDiagnosis{}}
	if w := run.Status.Workload; w != nil && w.Workload != "" {
		wl := &kueue.Workload{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: w.Workload}, wl); err == nil {
			d.Kueue = wl.Status.Conditions
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(run.Namespace), client.MatchingLabels{render.LabelRun: run.Name}); err != nil {
		return nil, err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	if len(pods.Items) > diagnoseMaxPods {
		d.Truncated = append(d.Truncated, fmt.Sprintf("pods: %d of %d shown", diagnoseMaxPods, len(pods.Items)))
		pods.Items = pods.Items[:diagnoseMaxPods]
	}
	mask, unmasked := SecretMasker(ctx, c, run.Namespace, pods.Items)
	if unmasked != nil {
		// What the pods wrote may hold a value that cannot be masked:
		// their log tails and termination messages are withheld, the rest
		// of the diagnosis is the cluster's own words.
		d.Truncated = append(d.Truncated, "log tails and termination messages withheld: "+unmasked.Error())
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		pd := PodDiagnosis{Name: p.Name, Node: p.Spec.NodeName, Phase: p.Status.Phase, Reason: p.Status.Reason,
			Containers: append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)}
		for j := range pd.Containers {
			if t := pd.Containers[j].State.Terminated; t != nil {
				t.Message = mask.Mask(t.Message)
				if unmasked != nil && t.Message != "" {
					t.Message = "(withheld)"
				}
			}
		}
		if logs != nil && len(p.Spec.Containers) > 0 && unmasked == nil {
			pd.LogTail = logTail(ctx, logs, p, mask)
		}
		d.Pods = append(d.Pods, pd)
		if n := p.Spec.NodeName; n != "" {
			if _, seen := d.Nodes[n]; !seen {
				d.Nodes[n] = nodeDiagnosis(ctx, c, n)
			}
		}
	}
	if err := d.addEvents(ctx, c, run); err != nil {
		return nil, err
	}
	d.Message = mask.Mask(d.Message)
	return d, nil
}

func nodeDiagnosis(ctx context.Context, c client.Reader, name string) NodeDiagnosis {
	n := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
		return NodeDiagnosis{}
	}
	nd := NodeDiagnosis{Exists: true}
	for _, cond := range n.Status.Conditions {
		if string(cond.Type) == taugridv1.ConditionGPUHealthy {
			nd.GPUHealthy, nd.Message = string(cond.Status), cond.Message
		}
	}
	return nd
}

// Events are read in pages, and only so many: a namespace may hold
// hundreds of thousands, and a diagnosis must not hold them all.
const (
	diagnoseEventPage     = 500
	diagnoseMaxEventPages = 4
)

// addEvents keeps the newest events whose object is the run or named after
// it (its Jobs, Workloads and pods), of the namespace's first pages.
func (d *Diagnosis) addEvents(ctx context.Context, c client.Reader, run *taugridv1.TauRun) error {
	events, complete, err := listEvents(ctx, c, run.Namespace, diagnoseEventPage, diagnoseMaxEventPages,
		func(e *eventsv1.Event) bool { return strings.HasPrefix(e.Regarding.Name, run.Name) })
	if err != nil {
		return err
	}
	if !complete {
		d.Truncated = append(d.Truncated, fmt.Sprintf("events: only the first %d of the namespace's events were searched", diagnoseEventPage*diagnoseMaxEventPages))
	}
	for _, e := range events {
		t := e.EventTime.Time
		if t.IsZero() {
			t = e.DeprecatedLastTimestamp.Time
		}
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		d.Events = append(d.Events, EventDiagnosis{Time: metav1.NewTime(t), Type: e.Type, Object: e.Regarding.Kind + "/" + e.Regarding.Name,
			Reason: e.Reason, Message: e.Note})
	}
	sort.Slice(d.Events, func(i, j int) bool { return d.Events[i].Time.Before(&d.Events[j].Time) })
	if n := len(d.Events); n > diagnoseMaxEvents {
		d.Truncated = append(d.Truncated, fmt.Sprintf("events: the newest %d of %d shown", diagnoseMaxEvents, n))
		d.Events = d.Events[n-diagnoseMaxEvents:]
	}
	return nil
}

// listEvents lists the namespace's events page by page (Limit and
// Continue), keeping those keep accepts, and stops after maxPages pages;
// complete says whether it read them all.
func listEvents(ctx context.Context, c client.Reader, ns string, page int64, maxPages int, keep func(*eventsv1.Event) bool) ([]eventsv1.Event, bool, error) {
	var out []eventsv1.Event
	cont := ""
	for range maxPages {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns), client.Limit(page), client.Continue(cont)); err != nil {
			return nil, false, err
		}
		for i := range evs.Items {
			if keep(&evs.Items[i]) {
				out = append(out, evs.Items[i])
			}
		}
		if cont = evs.Continue; cont == "" {
			return out, true, nil
		}
	}
	return out, false, nil
}

// logTail is the end of a pod's first container's log, bounded in lines
// and bytes whatever the pod wrote, with secrets masked.
func logTail(ctx context.Context, logs LogSource, p *corev1.Pod, mask *evidence.Masker) string {
	rc, err := logs.Logs(ctx, p.Namespace, p.Name, &corev1.PodLogOptions{Container: p.Spec.Containers[0].Name,
		TailLines: ptr.To(int64(diagnoseTailLines)), LimitBytes: ptr.To(int64(diagnoseTailBytes))})
	if err != nil {
		return "(no log: " + mask.Mask(err.Error()) + ")"
	}
	defer rc.Close()
	var buf bytes.Buffer
	if err := CopyMasked(&buf, io.LimitReader(rc, diagnoseTailBytes), mask); err != nil {
		return buf.String() + "\n(log cut short: " + err.Error() + ")"
	}
	return buf.String()
}

// SecretMasker masks the values of every Secret key the pods read, through
// env, envFrom or volumes, and token-looking strings, so a researcher's
// token echoed to the log never leaves the cluster. c reads the Secrets of
// the cluster the pods run on (clusters.Routed for a worker's). A Secret
// that does not exist is skipped (its values cannot reach the pod); one
// that cannot be read is an error matching ErrUnmasked, returned with the
// masker of everything else: its values could be in the log and could not
// be masked, so a log served to a team must be withheld.
func SecretMasker(ctx context.Context, c client.Reader, ns string, pods []corev1.Pod) (*evidence.Masker, error) {
	names := map[string]bool{}
	for i := range pods {
		SecretNames(&pods[i].Spec, names)
	}
	var values []string
	var unread error
	for _, name := range slices.Sorted(maps.Keys(names)) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			if unread == nil {
				unread = fmt.Errorf("the run's pods read Secret %s, which cannot be read (%s): %w",
					name, apierrors.ReasonForError(err), ErrUnmasked)
			}
			continue
		}
		for _, v := range s.Data {
			values = append(values, string(v))
		}
	}
	for i := range pods {
		values = append(values, SecretEnvValues(&pods[i].Spec)...)
	}
	return evidence.NewMasker(values...), unread
}

// ErrUnmasked: a Secret the pods read could not be read, so what the pods
// wrote cannot be masked; what is served to a team is withheld.
var ErrUnmasked = errors.New("its values cannot be masked")

// SecretEnvValues are the literal values of variables whose names say they
// hold a credential (WANDB_API_KEY: "..." written into the pod spec rather
// than read from a Secret).
func SecretEnvValues(s *corev1.PodSpec) []string {
	var values []string
	for _, ctr := range append(append([]corev1.Container(nil), s.InitContainers...), s.Containers...) {
		for _, v := range ctr.Env {
			if v.Value != "" && evidence.SecretEnvName(v.Name) {
				values = append(values, v.Value)
			}
		}
	}
	return values
}

// SecretNames adds every Secret a pod spec names: env, envFrom, volumes
// and image pull secrets.
func SecretNames(s *corev1.PodSpec, names map[string]bool) {
	for _, ctr := range append(append([]corev1.Container(nil), s.InitContainers...), s.Containers...) {
		for _, v := range ctr.Env {
			if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
				names[v.ValueFrom.SecretKeyRef.Name] = true
			}
		}
		for _, f := range ctr.EnvFrom {
			if f.SecretRef != nil {
				names[f.SecretRef.Name] = true
			}
		}
	}
	for _, v := range s.Volumes {
		if v.Secret != nil {
			names[v.Secret.SecretName] = true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					names[src.Secret.Name] = true
				}
			}
		}
	}
	for _, r := range s.ImagePullSecrets {
		names[r.Name] = true
	}
}

// CopyMasked streams r to w masked, whatever the chunking: each complete
// line at once (flushed, for followed logs), a long line in pieces cut
// where no secret can straddle them.
func CopyMasked(w io.Writer, r io.Reader, m *evidence.Masker) error {
	mw := m.NewWriter(w)
	_, err := io.Copy(mw, r)
	return errors.Join(err, mw.Close())
}

// AttemptPod is the first pod, by name, of the run's latest attempt (rank
// 0, or the Ray head): the pod whose log is the run's log; nil if the
// attempt has none yet.
func AttemptPod(ctx context.Context, c client.Reader, run *taugridv1.TauRun) (*corev1.Pod, error) {
	var pods corev1.PodList
	labels := client.MatchingLabels{render.LabelRun: run.Name}
	if n := len(run.Status.Attempts); n > 0 {
		labels[render.LabelAttempt] = strconv.Itoa(n)
	}
	if err := c.List(ctx, &pods, client.InNamespace(run.Namespace), labels); err != nil {
		return nil, err
	}
	var first *corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; len(p.Spec.Containers) > 0 && (first == nil || p.Name < first.Name) {
			first = p
		}
	}
	return first, nil
}

// PodLogs reads pod logs through the API server.
type PodLogs struct{ Pods corev1client.PodsGetter }

// Logs implements LogSource.
func (l PodLogs) Logs(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return l.Pods.Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}
