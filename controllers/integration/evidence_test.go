package integration

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/server"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// The secret a run's environment takes from a Secret, and its log echoes.
const hfToken = "hf-secret-value-0123456789"

// evidenceKubelet is a stand-in kubelet for a healthy GPU node, so the
// API server's pods/log works as in a cluster.
func evidenceKubelet(t *testing.T, node string) *controlplane.Kubelet {
	t.Helper()
	k := controlplane.StartKubelet(t, k8s, node)
	n := &corev1.Node{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: taugridv1.ConditionGPUHealthy, Status: corev1.ConditionTrue, Reason: "Healthy",
		Message: "8 GPUs healthy", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}
	if err := k8s.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return k
}

// attestationKeySecret holds the key that signs attestations, in the
// test's namespace (the controller's own, in a cluster).
const attestationKeySecret = "tau-attestation-key"

type evidenceFixture struct {
	*runFixture
	store    *evidence.FileStore
	recorder *sealing.EvidenceRecorder
	kubelet  *controlplane.Kubelet
}

func newEvidenceFixture(t *testing.T, prefix string) *evidenceFixture {
	t.Helper()
	f := newRunFixture(t, prefix)
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rec := &sealing.EvidenceRecorder{Client: cacheLike{k8s}, APIReader: k8s, Events: startEventBook(t), Logs: runs.PodLogs{Pods: cs.CoreV1()}, Files: f.runRec.Files,
		Policies: f.runRec.Policies.(*policy.PolicyStore), Sources: &server.Sources{BaseURL: "http://tau-controller:9090", FetchImage: "tau:v1"},
		Store: st, Clock: f.runRec.Clock, Recorder: events.NewFakeRecorder(100),
		Attestations: &sealing.AttestationKeys{Client: k8s, Namespace: f.ns, Name: attestationKeySecret}}
	f.sealer = rec
	f.runRec.Evidence = &evidence.Page{URL: "https://tau.example/", Links: evidenceLinks}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf", Namespace: f.ns}, StringData: map[string]string{"token": hfToken}}
	if err := k8s.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	f.research.edit("tau.yaml", "    PYTHONUNBUFFERED: \"1\"\n", "    PYTHONUNBUFFERED: \"1\"\n  env_secret:\n    HF_TOKEN: \"hf:token\"\n")
	f.research.commit("read the Hugging Face token from a Secret")
	return &evidenceFixture{runFixture: f, store: st, recorder: rec, kubelet: evidenceKubelet(t, prefix+"-gpu-1")}
}

// startEventBook watches the control plane's events into a book, from
// which the sealer reads them as cmd/tau-controller's does, until the test
// ends.
func startEventBook(t *testing.T) *sealing.EventBook {
	t.Helper()
	book, err := sealing.NewEventBook(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = book.Start(ctx) }()
	waitFor(t, 30*time.Second, "the event book to list the cluster's events", book.Synced)
	return book
}

// startedPod records the attempt's pod on the fake kubelet's node, its
// main container ended with code and message, and its log.
func (f *evidenceFixture) startedPod(t *testing.T, run string, code int32, log string) string {
	t.Helper()
	name := run + "-1-xyz12"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{render.LabelRun: run, render.LabelAttempt: "1",
			render.LabelManagedBy: render.ManagedBy}},
		Spec: corev1.PodSpec{NodeName: f.kubelet.Node, Containers: []corev1.Container{{Name: "main", Image: "python:3.12-slim",
			Env: []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}}}},
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0], StartedAt: now, FinishedAt: now,
		Message: `TAU_METRIC {"final_loss": 0.05}`}}}}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	f.kubelet.Write(f.ns, name, "main", log)
	return name
}

// bundle reads and verifies the sealed bundle of attempt 1.
func (f *evidenceFixture) bundle(t *testing.T, run string) (*evidence.Manifest, *evidence.Record, map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	raw, err := f.store.Manifest(ctx, evidence.Key{Namespace: f.ns, Run: run, Attempt: 1})
	if err != nil {
		t.Fatalf("no sealed bundle for %s: %v", run, err)
	}
	if r := evidence.Verify(ctx, raw, f.store); !r.OK() || !r.Reproduced {
		t.Fatalf("the bundle does not verify: %+v", r)
	}
	m, _ := evidence.ParseManifest(raw)
	content := map[string][]byte{}
	for _, a := range m.Artifacts {
		content[a.Name], _ = f.store.Blob(ctx, a.SHA256)
	}
	rec := &evidence.Record{}
	if err := yaml.Unmarshal(content[evidence.ArtifactRecord], rec); err != nil {
		t.Fatal(err)
	}
	return m, rec, content
}

// noSecretIn fails when the token appears in any stored file.
func (f *evidenceFixture) noSecretIn(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(f.store.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if bytes.Contains(data, []byte(hfToken)) {
			t.Errorf("%s holds the secret", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestASucceededRunLeavesAVerifiableBundleWithItsSecretMasked(t *testing.T) {
	f := newEvidenceFixture(t, "ev1")
	f.research.tag("run/evidence")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/evidence")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	log := "loading\nHF_TOKEN=" + hfToken + "\nTAU_METRIC {\"step\": 1, \"loss\": 0.5}\nTAU_METRIC garbage\nTAU_METRIC {\"step\": 2, \"loss\": 0.25}\ndone\n"
	pod := f.startedPod(t, run.Name, 0, log)
	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))
	done := f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)

	want := "https://tau.example/runs/" + f.ns + "/" + run.Name + "?" + evidenceLinks.Query(f.ns, run.Name, done.CreationTimestamp.Add(evidenceLinks.TTL))
	if done.Status.EvidenceURL != want {
		t.Errorf("evidenceURL = %q, want %q", done.Status.EvidenceURL, want)
	}
	if c := apimeta.FindStatusCondition(done.Status.Conditions, shared.ConditionEvidence); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "sha256:") {
		t.Errorf("EvidenceSealed = %+v, want True naming the digest", c)
	}
	m, rec, content := f.bundle(t, run.Name)
	if m.Outcome != "Succeeded" || rec.Run.Phase != "Succeeded" || rec.Trigger.Ref != "refs/tags/run/evidence" || rec.Inputs.PolicyCommit == "" {
		t.Errorf("bundle outcome %s, record run %+v trigger %+v inputs %+v", m.Outcome, rec.Run, rec.Trigger, rec.Inputs)
	}
	if q := <-f.kubelet.Queries; !strings.Contains(q, "tailLines=500") || !strings.Contains(q, "limitBytes=262144") {
		t.Errorf("the log was asked for with %q, want tailLines and limitBytes", q)
	}
	logArtifact := evidence.PrefixLogs + pod + "/main.log"
	if got := string(content[logArtifact]); !strings.Contains(got, "HF_TOKEN=****") || !strings.Contains(got, "done") {
		t.Errorf("log tail = %q, want the token masked", got)
	}
	if mt := rec.Metrics; mt == nil || mt.Records != 3 || mt.Skipped != 1 || mt.Keys["loss"].Last != 0.25 || mt.Keys["final_loss"].Count != 1 {
		t.Errorf("metrics = %+v, want 3 records (2 from the log, 1 from the termination message) and 1 skipped", rec.Metrics)
	}
	if len(rec.Nodes) != 1 || rec.Nodes[0].GPUHealthyAtStart != "True" || rec.Kueue == nil || rec.Kueue.ClusterQueue == "" || len(rec.Kueue.Flavors) == 0 {
		t.Errorf("nodes %+v kueue %+v, want the healthy node and the admission with its flavor", rec.Nodes, rec.Kueue)
	}
	if !slices.ContainsFunc(rec.Events, func(e evidence.EventRecord) bool { return strings.HasPrefix(e.Object, "Workload/") }) {
		t.Errorf("events = %+v, want Kueue's events about the workload", rec.Events)
	}
	if a := rec.Attempts[0]; a.Start == nil || a.End == nil { // the fixture's fake clock makes their order meaningless
		t.Errorf("attempt = %+v, want its start and end", a)
	}
	if len(rec.Pods) != 1 || *rec.Pods[0].Containers[0].ExitCode != 0 {
		t.Errorf("pods = %+v", rec.Pods)
	}
	f.noSecretIn(t)

	t.Run("the attestation verifies with the public key of the Secret the controller made", func(t *testing.T) {
		ctx := context.Background()
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: attestationKeySecret}, s); err != nil {
			t.Fatal(err)
		}
		pub, err := evidence.ParsePublicKey(s.Data[sealing.AttestationPublicField])
		if err != nil {
			t.Fatal(err)
		}
		key := evidence.Key{Namespace: f.ns, Run: run.Name, Attempt: 1}
		raw, _ := f.store.Manifest(ctx, key)
		env, err := f.store.Attestation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		r := evidence.VerifyAttested(ctx, raw, f.store, env, pub)
		if !r.OK() || r.Attestation.Commit != rec.Run.Commit || r.Attestation.PolicyCommit != rec.Inputs.PolicyCommit ||
			r.Attestation.Repository != rec.Run.RepositoryURL || len(r.Attestation.Subjects) != len(m.Artifacts)+1 {
			t.Errorf("attestation: %v %+v", r.Problems, r.Attestation)
		}
	})

	t.Run("the recorded manifests are what was submitted", func(t *testing.T) {
		live := &batchv1.Job{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: render.WorkloadName(run.Name, 1)}, live); err != nil {
			t.Fatal(err)
		}
		recorded := &batchv1.Job{}
		if err := yaml.Unmarshal(content[evidence.ArtifactManifests], recorded); err != nil {
			t.Fatal(err)
		}
		want, got := live.Spec.Template.Spec, recorded.Spec.Template.Spec
		if d := cmp.Diff(want.Containers[0].Env, got.Containers[0].Env); d != "" {
			t.Errorf("recorded env (-submitted +recorded):\n%s", d)
		}
		if d := cmp.Diff(want.Containers[0].Command, got.Containers[0].Command); d != "" || want.Containers[0].Image != got.Containers[0].Image {
			t.Errorf("recorded command/image differ:\n%s", d)
		}
		if d := cmp.Diff(live.Annotations, recorded.Annotations); d != "" {
			t.Errorf("recorded annotations (-submitted +recorded):\n%s", d)
		}
	})

	t.Run("re-rendering from the recorded commits reproduces the manifests byte for byte", func(t *testing.T) {
		ctx := context.Background()
		var in evidence.RenderInputs
		if err := yaml.Unmarshal(content[evidence.ArtifactRenderInputs], &in); err != nil {
			t.Fatal(err)
		}
		tau, err := f.runRec.Files.ReadFile(ctx, f.repo, rec.Trigger.Ref, rec.Run.Commit, in.TauFile)
		if err != nil {
			t.Fatal(err)
		}
		policy := policyFilesAt(t, f.runRec.Policies.(*policy.PolicyStore), f.repo.Spec.Platform, rec.Inputs.PolicyCommit)
		got, err := evidence.Rerender(in, tau, policy)
		if err != nil || !bytes.Equal(got, content[evidence.ArtifactManifests]) {
			t.Errorf("re-rendered from git: err %v, equal %v", err, bytes.Equal(got, content[evidence.ArtifactManifests]))
		}
	})

	t.Run("the page and its JSON show the run with the secret masked", func(t *testing.T) {
		srv := httptest.NewServer((&evidence.Server{Store: f.store, Runs: &sealing.EvidenceRuns{Client: k8s}, Links: evidenceLinks}).Handler())
		defer srv.Close()
		link := strings.Replace(done.Status.EvidenceURL, "https://tau.example", srv.URL, 1)
		for _, accept := range []string{"text/html", "application/json"} {
			req, _ := http.NewRequest(http.MethodGet, link, nil)
			req.Header.Set("Accept", accept)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || strings.Contains(body.String(), hfToken) || !strings.Contains(body.String(), "HF_TOKEN=****") ||
				!strings.Contains(body.String(), "Succeeded") {
				t.Errorf("%s page: %d, holds the secret %v", accept, resp.StatusCode, strings.Contains(body.String(), hfToken))
			}
		}
	})
}

func TestAFailedRunsBundleRecordsTheExitCodeAndClass(t *testing.T) {
	f := newEvidenceFixture(t, "ev2")
	f.research.tag("run/exits-3")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/exits-3")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	f.startedPod(t, run.Name, 3, "Traceback (most recent call last):\nValueError: bad lr\n")
	failJob(t, f.ns, render.WorkloadName(run.Name, 1))
	f.reconcileRun(t, run.Name, taugridv1.PhaseFailed)
	m, rec, _ := f.bundle(t, run.Name)
	if m.Outcome != "Failed" || rec.Attempts[0].FailureClass != "UserError" || *rec.Pods[0].Containers[0].ExitCode != 3 {
		t.Errorf("outcome %s, attempt %+v, pods %+v; want Failed, UserError, exit code 3", m.Outcome, rec.Attempts[0], rec.Pods)
	}
	f.noSecretIn(t)
}

func TestACancelledRunsBundleIsSealed(t *testing.T) {
	f := newEvidenceFixture(t, "ev3")
	f.research.tag("run/doomed")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/doomed")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	f.research.deleteRemoteTag("run/doomed")
	f.poll(t)
	f.reconcileRun(t, run.Name, taugridv1.PhaseCancelled)
	m, rec, _ := f.bundle(t, run.Name)
	if m.Outcome != "Cancelled" || rec.Run.Phase != "Cancelled" {
		t.Errorf("outcome %s, phase %s; want Cancelled", m.Outcome, rec.Run.Phase)
	}
}

// brokenStore fails every write, as a full or unreachable store does.
type brokenStore struct{ evidence.Store }

func (brokenStore) PutBlob(context.Context, string, []byte) error {
	return fmt.Errorf("writing blob: %w", syscall.ENOSPC)
}

func TestAFullStoreLeavesTheRunAloneAndTheBundleIsRetried(t *testing.T) {
	f := newEvidenceFixture(t, "ev4")
	f.recorder.Store = brokenStore{f.store}
	f.research.tag("run/full")
	f.poll(t)
	run := f.runOf(t, "refs/tags/run/full")
	f.reconcileRun(t, run.Name, taugridv1.PhaseAdmitted)
	f.startedPod(t, run.Name, 0, "ok\n")
	completeJob(t, f.ns, render.WorkloadName(run.Name, 1))
	done := f.reconcileRun(t, run.Name, taugridv1.PhaseSucceeded)
	c := apimeta.FindStatusCondition(done.Status.Conditions, shared.ConditionEvidence)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sealing.ReasonStoreUnavailable || !strings.Contains(c.Message, "no space left") {
		t.Fatalf("EvidenceSealed = %+v, want False StoreUnavailable", c)
	}
	if !apimeta.IsStatusConditionTrue(done.Status.Conditions, taugridv1.ConditionReady) {
		t.Error("a run whose evidence could not be stored is not Ready")
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(done)}
	if _, err := f.recorder.Reconcile(context.Background(), req); err == nil {
		t.Error("retrying against the full store succeeded")
	}

	f.recorder.Store = f.store // space freed
	if _, err := f.recorder.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("retrying: %v", err)
	}
	got := &taugridv1.TauRun{}
	if err := k8s.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, shared.ConditionEvidence) || got.Status.Phase != taugridv1.PhaseSucceeded {
		t.Errorf("after the retry: phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
	}
	f.bundle(t, run.Name)

	t.Run("a False condition over bundles sealed before heals", func(t *testing.T) {
		base := got.DeepCopy()
		f.recorder.SetCondition(got, metav1.ConditionFalse, sealing.ReasonStoreUnavailable, "a status write was lost")
		if err := k8s.Status().Patch(context.Background(), got, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.recorder.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(context.Background(), req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, shared.ConditionEvidence) {
			t.Errorf("EvidenceSealed = %+v, want True", apimeta.FindStatusCondition(got.Status.Conditions, shared.ConditionEvidence))
		}
	})

	// The run reconciler owns Ready, the evidence retry EvidenceSealed; both
	// live in one status.conditions list, which a merge patch replaces
	// whole. A retry working from a copy older than the run reconciler's
	// last write must not put the old list back.
	t.Run("a retry from a stale copy does not erase the run reconciler's condition", func(t *testing.T) {
		ctx := context.Background()
		base := got.DeepCopy()
		f.recorder.SetCondition(got, metav1.ConditionFalse, sealing.ReasonStoreUnavailable, "a status write was lost")
		if err := k8s.Status().Patch(ctx, got, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		stale := got.DeepCopy()
		base = got.DeepCopy()
		const said = "the run reconciler's newest word"
		shared.SetCondition(&got.Status.Conditions, got.Generation, f.runRec.Clock.Now(), taugridv1.ConditionReady, metav1.ConditionTrue, "Succeeded", said)
		if err := k8s.Status().Patch(ctx, got, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}

		f.recorder.Client = laggingCache{Client: k8s, old: stale}
		_, _ = f.recorder.Reconcile(ctx, req) // a stale copy: its write is refused, and retried
		f.recorder.Client = k8s
		if _, err := f.recorder.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		if c := apimeta.FindStatusCondition(got.Status.Conditions, taugridv1.ConditionReady); c == nil || c.Message != said {
			t.Errorf("Ready = %+v: the evidence retry erased the run reconciler's condition", c)
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, shared.ConditionEvidence) {
			t.Errorf("EvidenceSealed = %+v, want True", apimeta.FindStatusCondition(got.Status.Conditions, shared.ConditionEvidence))
		}
	})
}

// evidenceLinks signs the evidence links of the tests' recorders.
var evidenceLinks = &evidence.Links{Key: []byte("0123456789abcdef0123456789abcdef"), TTL: 30 * 24 * time.Hour}

// TestEvidenceNeedsTheTeamsTokenOrTheRunsLink is the attacker's side on the
// real API server: team b's API token (a Secret the runs API reads) opens
// none of team a's evidence, and neither does team a's link on another
// run or past its expiry; team a's token opens it.
func TestEvidenceNeedsTheTeamsTokenOrTheRunsLink(t *testing.T) {
	integration(t)
	ctx := context.Background()
	tokensNS := "evtok-system"
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tokensNS}}}
	for team, token := range map[string]string{"evtok-a": "team-a-secret-token", "evtok-b": "team-b-secret-token"} {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: team, Namespace: tokensNS, Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
			Data: map[string][]byte{taugridv1.APITokenKey: []byte(token), taugridv1.APINamespaceKey: []byte(team)}})
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := evidence.Key{Namespace: "evtok-a", Run: "research-1a2b", Attempt: 1}
	b := evidence.NewBundle(key, "Succeeded")
	b.Add(evidence.PrefixTauFile+"tau.yaml", evidence.MediaYAML, []byte("name: team-a-private\n"))
	sealed, err := b.Seal(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.Write(ctx, st, sealed); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer((&evidence.Server{Store: st, Links: evidenceLinks, Now: func() time.Time { return now },
		Tokens: &server.Tokens{Reader: k8s, Namespace: tokensNS, Clock: clocktesting.NewFakePassiveClock(now)}}).Handler())
	defer srv.Close()
	page := srv.URL + "/runs/evtok-a/research-1a2b"
	blob := page + "/blobs/" + sealed.Manifest.Artifacts[0].SHA256
	for name, c := range map[string]struct {
		url, token string
		code       int
	}{
		"team a's token, the page":        {page, "team-a-secret-token", http.StatusOK},
		"team a's token, the tau file":    {blob, "team-a-secret-token", http.StatusOK},
		"the run's link":                  {page + "?" + evidenceLinks.Query("evtok-a", "research-1a2b", now.Add(time.Hour)), "", http.StatusOK},
		"team b's token, the page":        {page, "team-b-secret-token", http.StatusForbidden},
		"team b's token, the tau file":    {blob, "team-b-secret-token", http.StatusForbidden},
		"no credential":                   {blob, "", http.StatusUnauthorized},
		"team b's run's link on team a's": {page + "?" + evidenceLinks.Query("evtok-b", "research-1a2b", now.Add(time.Hour)), "", http.StatusForbidden},
		"the run's link, expired":         {page + "?" + evidenceLinks.Query("evtok-a", "research-1a2b", now.Add(-time.Minute)), "", http.StatusForbidden},
		"the run's link signed elsewhere": {page + "?" + (&evidence.Links{Key: []byte(strings.Repeat("x", 32))}).Query("evtok-a", "research-1a2b", now.Add(time.Hour)), "", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.url, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: GET = %s, want %d", name, resp.Status, c.code)
		}
		if c.code != http.StatusOK && strings.Contains(body.String(), "team-a-private") {
			t.Errorf("%s: the refusal shows team a's tau file", name)
		}
	}
}

// TestTheEvidenceLinkKeyIsCreatedOnceAndKept: the first start creates the
// Secret; later starts, and a replica racing it, read the same key.
func TestTheEvidenceLinkKeyIsCreatedOnceAndKept(t *testing.T) {
	integration(t)
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "evkey-system"}}); err != nil {
		t.Fatal(err)
	}
	first, err := sealing.EvidenceLinkKey(ctx, k8s, "evkey-system", "tau-evidence-link-key")
	if err != nil || len(first) < evidence.MinKeyBytes {
		t.Fatalf("first start: %d bytes, %v", len(first), err)
	}
	again, err := sealing.EvidenceLinkKey(ctx, k8s, "evkey-system", "tau-evidence-link-key")
	if err != nil || !bytes.Equal(first, again) {
		t.Errorf("a restart read another key (%v): links signed before it would stop opening", err)
	}
	short := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "short", Namespace: "evkey-system"}, Data: map[string][]byte{sealing.EvidenceKeyField: []byte("weak")}}
	if err := k8s.Create(ctx, short); err != nil {
		t.Fatal(err)
	}
	if _, err := sealing.EvidenceLinkKey(ctx, k8s, "evkey-system", "short"); err == nil || strings.Contains(err.Error(), "weak") {
		t.Errorf("a 4-byte key: %v, want refused without showing it", err)
	}
}

// policyFilesAt reads the policy files (the .yaml files of the policy
// directory) of platform at commit, as tau evidence verify's reader holds
// them, from the store's tree of that commit.
func policyFilesAt(t *testing.T, store *policy.PolicyStore, platform, commit string) map[string][]byte {
	t.Helper()
	var p taugridv1.TauPlatform
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: platform}, &p); err != nil {
		t.Fatal(err)
	}
	lp, err := store.Load(context.Background(), &p, commit)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(lp.Tree, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		if out[n], err = fs.ReadFile(lp.Tree, n); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
