package sealing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
)

// maxEvents bounds the events a bundle keeps: the newest.
const maxEvents = 200

// Collection is what one attempt's bundle is built from.
type Collection struct {
	Run     *taugridv1.TauRun
	Attempt int
	repo    *taugridv1.TauRepository
	owner   client.Object // the attempt's Job or RayJob; nil when gone
	Rec     *evidence.Record
	bundle  *evidence.Bundle
	objs    []client.Object // what the attempt rendered
	Masker  *evidence.Masker
	At      attemptCluster // where the attempt's pods are read
	pods    []corev1.Pod   // the attempt's pods, read first
	logs    []rawLog       // their containers' log tails, unmasked, read first
	// attemptObjects names the attempt's own objects whose events the
	// bundle records: its Job or RayJob, Workload and pods (not the run).
	attemptObjects map[string]bool
}

// sealAttempt collects and stores the bundle of attempt n; it returns the
// bundle's digest, or "" when it was sealed before. Only storing can fail:
// whatever the cluster no longer shows is noted in the bundle.
func (e *EvidenceRecorder) sealAttempt(ctx context.Context, run *taugridv1.TauRun, n int) (string, error) {
	key := evidence.Key{Namespace: run.Namespace, Run: run.Name, Attempt: n}
	if has, err := evidence.Has(ctx, e.Store, key); err != nil || has {
		return "", err
	}
	c, err := e.collect(ctx, run, n)
	if err != nil {
		return "", err
	}
	sealed, err := c.bundle.Seal(e.Clock.Now())
	if err != nil {
		return "", err
	}
	if sealed.Attestation, err = e.attest(ctx, sealed); err != nil {
		return "", err
	}
	if err := evidence.Write(ctx, e.Store, sealed); err != nil {
		return "", err
	}
	// Sealed: no bundle reads the attempt's events again.
	c.At.book.Forget(run.Namespace, c.attemptObjects)
	return sealed.Digest(), nil
}

// attest signs the bundle's attestation. Without a key that parses there
// is no seal: a bundle is never sealed unsigned.
func (e *EvidenceRecorder) attest(ctx context.Context, s *evidence.Sealed) ([]byte, error) {
	if e.Attestations == nil {
		return nil, attestationKeyError{errors.New("no attestation key is configured")}
	}
	k, err := e.Attestations.Key(ctx)
	if err != nil {
		return nil, attestationKeyError{err}
	}
	return evidence.Attest(ctx, s, k)
}

// attestationKeyError: the key that signs attestations cannot be had.
type attestationKeyError struct{ error }

func (e attestationKeyError) Unwrap() error { return e.error }

func (e *EvidenceRecorder) collect(ctx context.Context, run *taugridv1.TauRun, n int) (*Collection, error) {
	c := &Collection{Run: run, Attempt: n, Rec: &evidence.Record{}, Masker: evidence.NewMasker()}
	c.bundle = evidence.NewBundle(evidence.Key{Namespace: run.Namespace, Run: run.Name, Attempt: n}, outcome(run, n))
	c.At = e.ClusterOf(ctx, c)
	for _, step := range []func(context.Context, *Collection) error{
		e.snapshotPods, e.collectRun, e.collectInputs, e.collectSecrets, e.collectKueue, e.collectPods, e.collectEvents, e.collectLogs,
	} {
		if err := step(ctx, c); err != nil {
			return nil, err
		}
	}
	c.stampAttempt(e.Clock.Now())
	c.maskRecord()
	data, err := json.MarshalIndent(c.Rec, "", "  ")
	if err != nil {
		return nil, err
	}
	// A last pass over the serialised record, for secrets in fields no step
	// thought of; kept only if the JSON survives it.
	if masked := c.Masker.MaskBytes(data); json.Valid(masked) {
		data = masked
	}
	c.bundle.Add(evidence.ArtifactRecord, evidence.MediaJSON, append(data, '\n'))
	return c, nil
}

// stampAttempt fills in the attempt's times where the status has none: it
// started when its workload was created and ended by the seal at the latest.
func (c *Collection) stampAttempt(now time.Time) {
	a := &c.Rec.Attempts[c.Attempt-1]
	if start := attemptStart(c); a.Start == nil && !start.IsZero() {
		start = start.UTC()
		a.Start = &start
	}
	if a.End == nil {
		end := now.UTC()
		if n := len(c.Run.Status.Phases); n > 0 && c.Run.Status.Phase.Final() {
			end = c.Run.Status.Phases[n-1].Time.UTC()
		}
		a.End = &end
	}
}

// outcome names how attempt n ended.
func outcome(run *taugridv1.TauRun, n int) string {
	a := run.Status.Attempts[n-1]
	switch {
	case n < len(run.Status.Attempts) || (a.FailureClass != "" && !run.Status.Phase.Final()):
		return "Retried"
	case run.Status.Phase.Final():
		return string(run.Status.Phase)
	case a.FailureClass != "":
		return string(taugridv1.PhaseFailed)
	}
	return "Ended"
}

// note records what could not be collected.
func (c *Collection) note(format string, args ...any) {
	c.Rec.Notes = append(c.Rec.Notes, fmt.Sprintf(format, args...))
}

// collectRun records the run, its trigger, phases and attempts, and finds
// its repository and the attempt's workload.
func (e *EvidenceRecorder) collectRun(ctx context.Context, c *Collection) error {
	run := c.Run
	c.Rec.Run = evidence.RunInfo{Namespace: run.Namespace, Name: run.Name, Repository: run.Spec.Repository,
		Target: run.Spec.Target, Commit: run.Spec.Commit, Phase: string(run.Status.Phase), Message: run.Status.Message}
	c.Rec.Trigger = evidence.TriggerOf(run)
	c.Rec.Inputs = evidence.InputsOf(run)
	c.Rec.Phases = evidence.PhaseSpans(run.Status.Phases, e.Clock.Now(), false)
	c.Rec.Attempts = evidence.AttemptInfos(run.Status.Attempts[:c.Attempt])
	repo := &taugridv1.TauRepository{}
	switch err := e.Client.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Repository}, repo); {
	case err == nil:
		c.repo = repo
		c.Rec.Run.RepositoryURL = evidence.StripCredentials(repo.Spec.URL)
	case apierrors.IsNotFound(err):
		c.note("repository %s is gone", run.Spec.Repository)
	default:
		return err
	}
	name := run.Status.Attempts[c.Attempt-1].Workload
	// The cache first: it holds every Job and RayJob of a run (the run
	// controller watches them), and what is read of it here (labels,
	// annotations, UID, creation time) is what the cache keeps. Only one
	// the cache does not hold is looked for in the API server, to tell
	// gone from not yet seen.
	readers := []client.Reader{e.Client}
	if e.APIReader != nil {
		readers = append(readers, e.APIReader)
	}
	for _, r := range readers {
		for _, owner := range []client.Object{&batchv1.Job{}, &rayv1.RayJob{}} {
			switch err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: name}, owner); {
			case err == nil:
				c.owner = owner
				return nil
			case !apierrors.IsNotFound(err):
				return err
			}
		}
	}
	c.note("workload %s is gone", name)
	return nil
}

func (e *EvidenceRecorder) reader() client.Reader {
	if e.APIReader != nil {
		return e.APIReader
	}
	return e.Client
}

// collectInputs stores the tau file, the policy files at the commit the
// attempt was rendered under, the render inputs and the manifests they
// render to, byte for byte as submitted.
func (e *EvidenceRecorder) collectInputs(ctx context.Context, c *Collection) error {
	run := c.Run
	if c.repo == nil {
		return nil
	}
	file := render.TargetFile(run.Spec.Target)
	data, err := e.Files.ReadFile(ctx, c.repo, run.Spec.Trigger.Ref, run.Spec.Commit, file)
	if err != nil {
		c.note("reading %s at %s: %v", file, run.Spec.Commit, err)
		return nil
	}
	commit := run.Status.PolicyCommit
	if c.owner != nil && c.owner.GetAnnotations()[render.AnnotationPolicyCommit] != "" {
		commit = c.owner.GetAnnotations()[render.AnnotationPolicyCommit]
	}
	c.Rec.Inputs.PolicyCommit = commit
	pol, err := e.Policies.PolicyAt(ctx, c.repo.Spec.Platform, commit)
	if err != nil {
		c.note("reading the policy at %s: %v", commit, err)
		return nil
	}
	in, applied, err := e.renderInputs(c, file, data, pol, commit)
	if err != nil {
		c.note("rendering attempt %d again: %v", c.Attempt, err)
		return nil
	}
	c.bundle.Add(evidence.PrefixTauFile+file, evidence.MediaYAML, data)
	// Only the part of the policy that applied to the run: the bundle is
	// the team's, and the rest of the policy is other teams'. The policy
	// commit and digest name the whole.
	for name, d := range applied {
		c.bundle.Add(evidence.PrefixPolicy+name, evidence.MediaYAML, d)
	}
	return c.bundle.AddJSON(evidence.ArtifactRenderInputs, in)
}

// renderInputs rebuilds what the run reconciler's plan gave attempt n:
// the same meta (avoided nodes and retry reason from the attempts before
// it, the checkpoint it resumed from, the source it fetched), under the
// same policy: the one the run reconciler parsed at the commit, not one
// parsed again per seal (hack/scale: a policy parsed each seal was a fifth
// of the seal's CPU), with its kueue/ Topologies, which a topology-aware
// run's manifests are rendered by. It returns the part of the policy that
// applied to the run's tenant, as policy files.
func (e *EvidenceRecorder) renderInputs(c *Collection, file string, data []byte, pol *render.Policy, commit string) (*evidence.RenderInputs, map[string][]byte, error) {
	run := c.Run
	rc, err := render.LoadConfigWithOverrides(file, data, run.Spec.Trigger.Overrides)
	if err != nil {
		return nil, nil, err
	}
	tenant := pol.TenantForNamespace(run.Namespace)
	if tenant == nil {
		return nil, nil, fmt.Errorf("namespace %s is no tenant's in the policy at %s", run.Namespace, commit)
	}
	applied, err := e.parts.of(pol, tenant.Name)
	if err != nil {
		return nil, nil, err
	}
	meta := shared.AttemptRun(run, c.Attempt, commit)
	if e.Sources != nil {
		meta.Source = e.Sources.SourceLocation(run)
	}
	in := &evidence.RenderInputs{TauFile: file, Overrides: run.Spec.Trigger.Overrides, Tenant: tenant.Name, Run: meta, PolicyDigest: pol.Digest}
	objs, err := render.RenderConfig(rc, pol, tenant.Name, meta)
	if err != nil {
		return nil, nil, err
	}
	manifests, err := render.Marshal(objs, render.FormatYAML)
	if err != nil {
		return nil, nil, err
	}
	c.objs = objs
	c.bundle.Add(evidence.ArtifactManifests, evidence.MediaYAML, manifests)
	c.Rec.Checkpoints = checkpointsOf(objs, rc, meta)
	c.Rec.Metrics = &evidence.Metrics{File: envOf(objs, "TAU_OUTPUT_DIR") + "/metrics.jsonl"}
	return in, applied, nil
}

func checkpointsOf(objs []client.Object, rc *render.RunConfig, meta render.Run) evidence.Checkpoints {
	return evidence.Checkpoints{PVC: rc.Storage.DataPVC, Dir: envOf(objs, "TAU_CHECKPOINT_DIR"), ResumeFrom: envOf(objs, "TAU_RESUME_FROM")}
}

// envOf reads a variable of the workload's main container.
func envOf(objs []client.Object, name string) string {
	for _, spec := range podSpecs(objs) {
		for _, ctr := range spec.Containers {
			for _, v := range ctr.Env {
				if v.Name == name {
					return v.Value
				}
			}
		}
	}
	return ""
}

func podSpecs(objs []client.Object) []*corev1.PodSpec {
	var out []*corev1.PodSpec
	for _, o := range objs {
		switch w := o.(type) {
		case *batchv1.Job:
			out = append(out, &w.Spec.Template.Spec)
		case *rayv1.RayJob:
			if rc := w.Spec.RayClusterSpec; rc != nil {
				out = append(out, &rc.HeadGroupSpec.Template.Spec)
				for i := range rc.WorkerGroupSpecs {
					out = append(out, &rc.WorkerGroupSpecs[i].Template.Spec)
				}
			}
		}
	}
	return out
}

// collectSecrets reads every Secret the attempt's pods reference, so their
// values are masked everywhere in the bundle.
func (e *EvidenceRecorder) collectSecrets(ctx context.Context, c *Collection) error {
	names := map[string]bool{}
	specs := podSpecs(c.objs)
	for i := range c.pods {
		specs = append(specs, &c.pods[i].Spec)
	}
	var values []string
	for _, s := range specs {
		runs.SecretNames(s, names)
		values = append(values, runs.SecretEnvValues(s)...)
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		values = append(values, secretValues(ctx, c, e.reader(), "", name)...)
		if c.At.secrets != nil {
			values = append(values, secretValues(ctx, c, c.At.secrets, c.At.name, name)...)
		}
	}
	c.Masker = evidence.NewMasker(values...)
	return nil
}

// secretValues are Secret name's values in the cluster r reads (worker
// names it; "" is the manager), to mask; one that cannot be read is noted.
func secretValues(ctx context.Context, c *Collection, r client.Reader, worker, name string) []string {
	s := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: c.Run.Namespace, Name: name}, s); err != nil {
		where := ""
		if worker != "" {
			where = " on worker cluster " + worker
		}
		// "secret <name>" would read as a keyed credential to the final
		// masking pass, which would then hide which Secret it was.
		c.note("could not read %s%s (a Secret) to mask its values (token-looking strings are still masked): %v", name, where, apierrors.ReasonForError(err))
		return nil
	}
	var values []string
	for _, v := range s.Data {
		values = append(values, string(v))
	}
	for _, v := range s.StringData {
		values = append(values, v)
	}
	return values
}

// AttemptPods lists the attempt's pods where they run. A worker that
// cannot be read leaves none, noted: a worker lost for good must not keep
// the bundle from being sealed.
func (c *Collection) AttemptPods(ctx context.Context) ([]corev1.Pod, error) {
	if c.At.pods == nil {
		return nil, nil
	}
	var pods corev1.PodList
	err := c.At.pods.List(ctx, &pods, client.InNamespace(c.Run.Namespace), attemptPods(c))
	switch {
	case err != nil && c.At.name != "":
		c.note("listing the pods on worker cluster %s: %s", c.At.name, c.Masker.Mask(err.Error()))
		c.At.pods = nil
		return nil, nil
	case err != nil:
		return nil, err
	}
	return pods.Items, nil
}

func attemptPods(c *Collection) client.MatchingLabels {
	return client.MatchingLabels{render.LabelRun: c.Run.Name, render.LabelAttempt: strconv.Itoa(c.Attempt)}
}

// collectKueue records the Workload's conditions, queue and flavors.
func (e *EvidenceRecorder) collectKueue(ctx context.Context, c *Collection) error {
	if c.owner == nil {
		return nil
	}
	var wls kueue.WorkloadList
	if err := e.Client.List(ctx, &wls, client.InNamespace(c.Run.Namespace), client.MatchingLabels{shared.KueueJobUID: string(c.owner.GetUID())}); err != nil {
		return err
	}
	for i := range wls.Items {
		if metav1.IsControlledBy(&wls.Items[i], c.owner) {
			c.Rec.Kueue = kueueTimeline(&wls.Items[i])
		}
	}
	if c.Rec.Kueue == nil {
		c.note("Kueue's workload for %s is gone", c.owner.GetName())
	}
	return nil
}

func kueueTimeline(wl *kueue.Workload) *evidence.KueueTimeline {
	k := &evidence.KueueTimeline{Workload: wl.Name, Queue: string(wl.Spec.QueueName)}
	if a := wl.Status.Admission; a != nil {
		k.ClusterQueue = string(a.ClusterQueue)
		k.Flavors = map[string]string{}
		for _, ps := range a.PodSetAssignments {
			for res, fl := range ps.Flavors {
				k.Flavors[string(ps.Name)+"/"+string(res)] = string(fl)
			}
		}
	}
	for _, cond := range wl.Status.Conditions {
		k.Conditions = append(k.Conditions, evidence.Condition{Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason,
			Message: cond.Message, Time: cond.LastTransitionTime.UTC()})
	}
	slices.SortStableFunc(k.Conditions, func(a, b evidence.Condition) int { return a.Time.Compare(b.Time) })
	for _, ac := range wl.Status.AdmissionChecks {
		k.AdmissionChecks = append(k.AdmissionChecks, evidence.AdmissionCheck{Name: string(ac.Name), State: string(ac.State),
			Message: ac.Message, Time: ac.LastTransitionTime.UTC()})
	}
	slices.SortFunc(k.AdmissionChecks, func(a, b evidence.AdmissionCheck) int { return strings.Compare(a.Name, b.Name) })
	return k
}

// collectPods records how each container of the attempt ended, and the
// nodes with their GPU health.
func (e *EvidenceRecorder) collectPods(ctx context.Context, c *Collection) error {
	if c.At.pods == nil {
		return nil
	}
	pods := c.pods
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	nodes := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		c.Rec.Pods = append(c.Rec.Pods, podRecord(p))
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
		}
	}
	if len(pods) == 0 {
		c.note("no pod of attempt %d is left to inspect", c.Attempt)
	}
	for _, name := range c.Rec.Attempts[c.Attempt-1].Nodes {
		nodes[name] = true
	}
	start := attemptStart(c)
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		rec, err := nodeRecord(ctx, c.At.pods, name, start)
		if err != nil && c.At.name != "" {
			c.note("reading node %s on worker cluster %s: %s", name, c.At.name, c.Masker.Mask(err.Error()))
			continue
		}
		if err != nil {
			return err
		}
		c.Rec.Nodes = append(c.Rec.Nodes, rec)
	}
	return nil
}

// attemptStart is when the attempt was submitted: its start time, or its
// workload's creation.
func attemptStart(c *Collection) time.Time {
	if s := c.Run.Status.Attempts[c.Attempt-1].StartTime; s != nil {
		return s.Time
	}
	if c.owner != nil {
		return c.owner.GetCreationTimestamp().Time
	}
	return time.Time{}
}

func podRecord(p *corev1.Pod) evidence.PodRecord {
	r := evidence.PodRecord{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Reason: p.Status.Reason}
	add := func(statuses []corev1.ContainerStatus, init bool) {
		for _, cs := range statuses {
			cr := evidence.ContainerRecord{Name: cs.Name, Init: init, Image: cs.Image, ImageID: cs.ImageID, Restarts: cs.RestartCount}
			if t := cs.State.Terminated; t != nil {
				cr.ExitCode, cr.Reason, cr.Message = ptr.To(t.ExitCode), t.Reason, t.Message
				started, finished := t.StartedAt.UTC(), t.FinishedAt.UTC()
				if !t.StartedAt.IsZero() {
					cr.Started = &started
				}
				if !t.FinishedAt.IsZero() {
					cr.Finished = &finished
				}
			} else if w := cs.State.Waiting; w != nil {
				cr.Reason, cr.Message = w.Reason, w.Message
			}
			r.Containers = append(r.Containers, cr)
		}
	}
	add(p.Status.InitContainerStatuses, true)
	add(p.Status.ContainerStatuses, false)
	return r
}

// nodeRecord reads a node's TauGPUHealthy condition and what it was when
// the attempt started: a condition that last changed after the start had
// the other status before.
func nodeRecord(ctx context.Context, r client.Reader, name string, start time.Time) (evidence.NodeRecord, error) {
	rec := evidence.NodeRecord{Name: name, GPUHealthyAtStart: "not reported"}
	n := &corev1.Node{}
	switch err := r.Get(ctx, types.NamespacedName{Name: name}, n); {
	case apierrors.IsNotFound(err):
		rec.Gone = true
		return rec, nil
	case err != nil:
		return rec, err
	}
	for _, cond := range n.Status.Conditions {
		if string(cond.Type) != taugridv1.ConditionGPUHealthy {
			continue
		}
		rec.GPUHealthy = &evidence.Condition{Type: string(cond.Type), Status: string(cond.Status), Reason: cond.Reason,
			Message: cond.Message, Time: cond.LastTransitionTime.UTC()}
		rec.GPUHealthyAtStart = string(cond.Status)
		if !start.IsZero() && cond.LastTransitionTime.After(start) {
			rec.GPUHealthyAtStart = healthBefore(cond.Status)
		}
	}
	return rec, nil
}

func healthBefore(now corev1.ConditionStatus) string {
	switch now {
	case corev1.ConditionFalse:
		return "True (turned False during the attempt)"
	case corev1.ConditionTrue:
		return "not True (turned True during the attempt)"
	}
	return "unknown (changed during the attempt)"
}

// collectEvents records the newest events about the run, its workloads and
// its pods.
func (e *EvidenceRecorder) collectEvents(ctx context.Context, c *Collection) error {
	c.attemptObjects = map[string]bool{c.Run.Status.Attempts[c.Attempt-1].Workload: true}
	if c.Rec.Kueue != nil {
		c.attemptObjects[c.Rec.Kueue.Workload] = true
	}
	for _, p := range c.Rec.Pods {
		c.attemptObjects[p.Name] = true
	}
	about := maps.Clone(c.attemptObjects)
	about[c.Run.Name] = true
	switch {
	case c.At.book.Synced():
		c.Rec.Events = c.At.book.About(c.Run.Namespace, about)
	case c.At.events == nil:
		c.note("events not recorded: no API reader")
		return nil
	default:
		for _, ev := range eventsAbout(ctx, c, about) {
			c.Rec.Events = append(c.Rec.Events, eventRecord(&ev))
		}
	}
	slices.SortStableFunc(c.Rec.Events, func(a, b evidence.EventRecord) int { return a.Time.Compare(b.Time) })
	if n := len(c.Rec.Events); n > maxEvents {
		c.Rec.Events = c.Rec.Events[n-maxEvents:]
	}
	return nil
}

// eventsPage is how many of a namespace's events one list reads. The API
// server scans the namespace's events for a list by object too (events
// have no index by object), so reading the namespace in pages and keeping
// the run's events costs it fewer requests than one list per object (the
// run, its Job, Workload and each pod) while the namespace needs fewer
// pages than there are objects; a busier one is read one list per object
// (after its first page, which says how many events are left).
const eventsPage = 250

// eventsAbout lists the namespace's events about the named objects. What
// cannot be listed is noted in the bundle; it never stops the seal.
func eventsAbout(ctx context.Context, c *Collection, about map[string]bool) []corev1.Event {
	kept, paged, err := pagedEvents(ctx, c, about)
	if err != nil {
		c.note("listing events: %v", c.Masker.Mask(eventsError(c, err)))
		return nil
	}
	if paged {
		return kept
	}
	kept = nil
	for _, name := range slices.Sorted(maps.Keys(about)) {
		// One field-selected list per object; for a dispatched attempt,
		// one on the manager and one on the worker.
		var list corev1.EventList
		if err := c.At.events.List(ctx, &list, client.InNamespace(c.Run.Namespace), client.MatchingFields{"involvedObject.name": name},
			client.Limit(maxEvents)); err != nil {
			c.note("listing events of %s: %v", name, c.Masker.Mask(eventsError(c, err)))
			continue
		}
		kept = append(kept, list.Items...)
	}
	return kept
}

// pagedEvents reads the namespace's events page by page and keeps those
// about the named objects. It stops after the first page (paged false)
// when the rest would take more requests than one list per object, or
// when a later page cannot be read (its continue token expired: noted);
// an error is the first page's.
func pagedEvents(ctx context.Context, c *Collection, about map[string]bool) ([]corev1.Event, bool, error) {
	var kept []corev1.Event
	var page corev1.EventList
	for first := true; first || page.Continue != ""; first = false {
		err := c.At.events.List(ctx, &page, client.InNamespace(c.Run.Namespace), client.Limit(eventsPage), client.Continue(page.Continue))
		if err != nil && first {
			return nil, false, err
		}
		if err != nil {
			c.note("events read one list per object: a page of the namespace's could not be read: %v", c.Masker.Mask(eventsError(c, err)))
			return nil, false, nil
		}
		for _, ev := range page.Items {
			if about[ev.InvolvedObject.Name] {
				kept = append(kept, ev)
			}
		}
		if first && page.Continue != "" && !pagingCostsNoMore(page.RemainingItemCount, len(about)) {
			return nil, false, nil
		}
	}
	return kept, true, nil
}

// pagingCostsNoMore: the rest of the namespace's events (remaining, as
// the API server counts them after the first page; nil when it does not)
// takes no more pages, the first one included, than the n lists of one
// per object would be requests.
func pagingCostsNoMore(remaining *int64, n int) bool {
	if remaining == nil {
		return false
	}
	pages := 1 + (*remaining+eventsPage-1)/eventsPage
	return pages <= int64(n)
}

// eventsError says why events could not be listed, naming the worker for
// a dispatched attempt (its error may be the worker's).
func eventsError(c *Collection, err error) string {
	if c.At.name == "" {
		return string(apierrors.ReasonForError(err))
	}
	return fmt.Sprintf("on the manager or worker cluster %s: %v", c.At.name, err)
}

// eventRecord is what a bundle records of ev.
func eventRecord(ev *corev1.Event) evidence.EventRecord {
	return evidence.EventRecord{Time: eventTime(ev), Type: ev.Type, Reason: ev.Reason,
		Object: ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name, Message: ev.Message, Count: ev.Count}
}

func eventTime(ev *corev1.Event) time.Time {
	for _, t := range []time.Time{ev.LastTimestamp.Time, ev.EventTime.Time, ev.FirstTimestamp.Time, ev.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t.UTC()
		}
	}
	return time.Time{}
}

// collectLogs stores the masked, bounded tail of every container's log and
// scans it, with the termination message, for metrics records.
func (e *EvidenceRecorder) collectLogs(ctx context.Context, c *Collection) error {
	if c.Rec.Metrics == nil {
		c.Rec.Metrics = &evidence.Metrics{}
	}
	logs := map[string]rawLog{}
	for _, l := range c.logs {
		logs[l.pod+"/"+l.container] = l
	}
	for _, p := range c.Rec.Pods {
		for _, ctr := range p.Containers {
			c.Rec.Metrics.ScanMetrics([]byte(c.Masker.Mask(ctr.Message)))
			if l, ok := logs[p.Name+"/"+ctr.Name]; ok {
				c.Rec.Logs = append(c.Rec.Logs, c.logTail(l))
			}
		}
	}
	return nil
}

// rawLog is a container's log tail as read, before masking.
type rawLog struct {
	pod, container string
	data           []byte
	truncated      bool
	err            error // reading it failed (data is nil) or was cut short
	failed         bool  // it could not be read at all
	fromMessage    bool  // data is the container's termination message (sourceOutput)
}

// snapshotPods reads the attempt's pods and their containers' log tails
// before anything else: a dispatched attempt's pods are the worker's, and
// MultiKueue removes them from it soon after the attempt's Workload
// finishes. Logs are read into memory, bounded, and masked later, once
// the Secrets the pods use are known.
func (e *EvidenceRecorder) snapshotPods(ctx context.Context, c *Collection) error {
	pods, err := c.AttemptPods(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	c.pods = pods
	if c.At.logs == nil {
		return nil
	}
	for i := range pods {
		for _, ctr := range containerNames(&pods[i]) {
			if out, ok := sourceOutput(&pods[i], ctr); ok {
				c.logs = append(c.logs, rawLog{pod: pods[i].Name, container: ctr, data: []byte(out), fromMessage: true})
				continue
			}
			c.logs = append(c.logs, readLog(ctx, c, pods[i].Name, ctr))
		}
	}
	return nil
}

// sourceOutput is the whole log of the pod's source fetch, from its
// termination message: tau fetch-source, once it has succeeded, writes
// there all it printed (render.SourceContainer), so its log is not read
// from the kubelet, one request a pod fewer. A fetch that failed, or an
// image from before it wrote the message (none then), is read as any
// container is.
func sourceOutput(p *corev1.Pod, container string) (string, bool) {
	if container != render.SourceContainer {
		return "", false
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; cs.Name == container && t != nil && t.ExitCode == 0 && t.Message != "" {
			return t.Message, true
		}
	}
	return "", false
}

// containerNames are the pod's containers that have a status (ran, or
// tried to), init containers first, as the record lists them.
func containerNames(p *corev1.Pod) []string {
	var out []string
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			out = append(out, cs.Name)
		}
	}
	return out
}

// readLog reads at most evidence.TailLines lines and evidence.ReadLimit
// bytes of a container's log, however much it wrote, keeping the tail.
func readLog(ctx context.Context, c *Collection, pod, container string) rawLog {
	l := rawLog{pod: pod, container: container}
	rc, err := c.At.logs.Logs(ctx, c.Run.Namespace, pod, &corev1.PodLogOptions{
		Container: container, TailLines: ptr.To(int64(evidence.TailLines)), LimitBytes: ptr.To(int64(evidence.ReadLimit))})
	if err != nil {
		l.err, l.failed = err, true
		return l
	}
	defer rc.Close()
	l.data, l.truncated, l.err = evidence.ReadTail(rc, evidence.ReadLimit, evidence.KeepBytes)
	return l
}

// logTail masks a log read at the start, scans it for metrics records and
// adds it to the bundle.
func (c *Collection) logTail(l rawLog) evidence.LogTail {
	t := evidence.LogTail{Pod: l.pod, Container: l.container, Artifact: evidence.PrefixLogs + l.pod + "/" + l.container + ".log"}
	if l.failed {
		t.Error = "log not available: " + c.Masker.Mask(l.err.Error())
		return t
	}
	data := c.Masker.MaskBytes(l.data)
	if l.fromMessage {
		// Scanned already, as the container's termination message.
		t.From = evidence.FromTerminationMessage
	} else {
		c.Rec.Metrics.ScanMetrics(data)
	}
	if l.err != nil {
		t.Error = "log cut short: " + c.Masker.Mask(l.err.Error())
	}
	t.Bytes, t.Truncated = len(data), l.truncated
	c.bundle.Add(t.Artifact, evidence.MediaText, data)
	return t
}

// maskRecord masks every free text of the record.
func (c *Collection) maskRecord() {
	m, rec := c.Masker, c.Rec
	rec.Run.Message = m.Mask(rec.Run.Message)
	for i := range rec.Attempts {
		rec.Attempts[i].Reason = m.Mask(rec.Attempts[i].Reason)
	}
	for k, v := range rec.Trigger.Overrides {
		rec.Trigger.Overrides[k] = m.Mask(v)
	}
	for i := range rec.Events {
		rec.Events[i].Message = m.Mask(rec.Events[i].Message)
	}
	for i := range rec.Pods {
		for j := range rec.Pods[i].Containers {
			rec.Pods[i].Containers[j].Message = m.Mask(rec.Pods[i].Containers[j].Message)
		}
	}
	if rec.Kueue != nil {
		for i := range rec.Kueue.Conditions {
			rec.Kueue.Conditions[i].Message = m.Mask(rec.Kueue.Conditions[i].Message)
		}
		for i := range rec.Kueue.AdmissionChecks {
			rec.Kueue.AdmissionChecks[i].Message = m.Mask(rec.Kueue.AdmissionChecks[i].Message)
		}
	}
}
