package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/taugrid/taugrid/controllers/janitor"
	runctrl "github.com/taugrid/taugrid/controllers/run"
	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// The worker's copy of the run's Secret: a platform team provisions each
// cluster's own, so its value can differ from the manager's.
const workerHFToken = "hf-worker-secret-value-9876543210"

// workerKubelet is a stand-in kubelet on a fleet worker: a GPU node the
// worker's scheduler places pods on, whose container logs the worker's API
// server serves, healthy an hour ago, until the test ends.
func workerKubelet(t *testing.T, w client.Client, node string) *controlplane.Kubelet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hourAgo := time.Now().Add(-time.Hour)
	k, err := controlplane.RunGPUKubelet(ctx, w, node, hourAgo, corev1.NodeCondition{Type: taugridv1.ConditionGPUHealthy, Status: corev1.ConditionTrue,
		Reason: "Healthy", Message: "8 GPUs healthy", LastTransitionTime: metav1.NewTime(hourAgo)})
	if err != nil {
		t.Fatal(err)
	}
	// Once the test's kubelet stops, nothing runs pods on its node: a
	// later test's pod must not land there.
	t.Cleanup(func() {
		_ = w.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	})
	return k
}

// setGPUHealth sets a worker node's TauGPUHealthy condition, as
// tau-nodeagent does, now.
func setGPUHealth(t *testing.T, w client.Client, node string, status corev1.ConditionStatus, msg string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := w.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		for i := range n.Status.Conditions {
			if c := &n.Status.Conditions[i]; c.Type == taugridv1.ConditionGPUHealthy {
				c.Status, c.Reason, c.Message, c.LastTransitionTime = status, "XidError", msg, metav1.Now()
			}
		}
		return w.Status().Update(context.Background(), n)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// startPodOn starts a pod no kubelet runs: every container running and
// ready.
func startPodOn(t *testing.T, w client.Client, p *corev1.Pod) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := w.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase, cur.Status.StartTime = corev1.PodRunning, &now
		cur.Status.ContainerStatuses = nil
		for _, c := range cur.Spec.Containers {
			cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
		return w.Status().Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// failPodOn ends a pod no kubelet ran: every container terminated with
// code and message, the pod Failed.
func failPodOn(t *testing.T, w client.Client, p *corev1.Pod, code int32, msg string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := w.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodFailed
		cur.Status.ContainerStatuses = nil
		for _, c := range cur.Spec.Containers {
			cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: msg,
					StartedAt: now, FinishedAt: now}}})
		}
		return w.Status().Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// withEvidence seals evidence into st, reading dispatched attempts from
// their workers as cmd/tau-controller does.
func withEvidence(t *testing.T, st evidence.Store) func(ctrl.Manager, *controllers) {
	return func(mgr ctrl.Manager, c *controllers) {
		withWorkers(mgr, c)
		c.sealer = newSealer(t, mgr, c.run, st, events.NewFakeRecorder(100))
	}
}

// newSealer is the evidence controller of a test manager, as
// cmd/tau-controller makes it beside run reconciler r: it seals into st,
// reads a local attempt's events from its book of the cluster's events
// and records its own with rec; r links the evidence pages.
func newSealer(t *testing.T, mgr ctrl.Manager, r *runctrl.RunReconciler, st evidence.Store, rec events.EventRecorder) *sealing.EvidenceRecorder {
	t.Helper()
	r.Evidence = &evidence.Page{}
	book, err := sealing.NewEventBook(mgr.GetConfig())
	if err == nil {
		err = mgr.Add(book)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &sealing.EvidenceRecorder{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: book,
		Logs:  runs.PodLogs{Pods: kubernetes.NewForConfigOrDie(mgr.GetConfig()).CoreV1()},
		Files: r.Files, Policies: r.Policies.(*policy.PolicyStore), Store: st, Clock: r.Clock, Recorder: rec,
		Clusters: r.Clusters, Attestations: watchedAttestationKeys(t, mgr, metav1.NamespaceDefault, attestationKeySecret)}
}

// workerPodOf waits for the one pod of the run's attempt on worker w to be
// bound to a node.
func workerPodOf(t *testing.T, w client.Client, run *taugridv1.TauRun, attempt string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 120*time.Second, "the run's pod to be scheduled on the worker", func() bool {
		var pods corev1.PodList
		err := w.List(context.Background(), &pods, client.InNamespace(run.Namespace), client.MatchingLabels{render.LabelRun: run.Name, render.LabelAttempt: attempt})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName == "" {
			return false
		}
		pod = &pods.Items[0]
		return true
	})
	return pod
}

// A dispatched run whose pod fails on a worker node whose GPUs turned
// unhealthy is classified from that node (the manager has neither pod
// nor node), and its evidence bundle holds what only the worker has: the
// pod and how it ended, the node's GPU health then and at the start, the
// container's log tail (masked with both clusters' Secret values), the
// worker's pod events beside the manager's Workload events; nothing of
// the worker's kubeconfig is anywhere in the bundle or the run.
func TestADispatchedRunsClassAndEvidenceAreReadFromItsWorker(t *testing.T) {
	fl := onFleet(t)
	ctx := context.Background()
	f := newRunFixture(t, "mr1")
	endAttemptsLeft(t, fl, f.ns)
	dispatchTenant(t, fl, f, "mr1-a")
	large := workerClient(t, fl, "large")
	create(t, k8s, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf", Namespace: f.ns}, StringData: map[string]string{"token": hfToken}})
	create(t, large, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf", Namespace: f.ns}, StringData: map[string]string{"token": workerHFToken}})
	f.research.edit("tau.yaml", "    PYTHONUNBUFFERED: \"1\"\n", "    PYTHONUNBUFFERED: \"1\"\n  env_secret:\n    HF_TOKEN: \"hf:token\"\n")
	f.research.commit("read the Hugging Face token from a Secret")
	cordonAll(t, large)
	kubelet := workerKubelet(t, large, "mr1-large")
	st, err := evidence.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := startManagerWith(t, withEvidence(t, st))
	defer m.stop()

	f.research.runRef("gpu", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/gpu")
	pod := workerPodOf(t, large, run, "1")
	if pod.Spec.NodeName != kubelet.Node {
		t.Fatalf("the run's pod is on node %s, want %s", pod.Spec.NodeName, kubelet.Node)
	}
	// MultiKueue deletes the worker's Job as soon as the manager's
	// Workload finishes; the run reconciler holds it (and so its pods)
	// until the bundle is sealed.
	job := &batchv1.Job{}
	waitFor(t, 30*time.Second, "the worker's Job to be held for the evidence", func() bool {
		err := large.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: pod.Labels["job-name"]}, job)
		return err == nil && slices.Contains(job.Finalizers, taugridv1.FinalizerEvidence)
	})
	kubelet.Write(f.ns, pod.Name, pod.Spec.Containers[0].Name, "step 1\nHF_TOKEN="+workerHFToken+" and "+hfToken+"\nCUDA error: an illegal memory access was encountered\n")
	startPodOn(t, large, pod)
	waitForSaying(t, 60*time.Second, "the run to run, as its pod on the worker shows", func() bool {
		return getRun(t, f.ns, run.Name).Status.Phase == taugridv1.PhaseRunning
	}, func() string {
		r := getRun(t, f.ns, run.Name)
		var pods corev1.PodList
		if err := large.List(ctx, &pods, client.InNamespace(f.ns)); err != nil {
			return err.Error()
		}
		seen := fmt.Sprintf("the run %s: %s", r.Status.Phase, r.Status.Message)
		for _, p := range pods.Items {
			seen += fmt.Sprintf("; the worker's pod %s %s", p.Name, p.Status.Phase)
		}
		return seen
	})
	time.Sleep(1100 * time.Millisecond) // conditions keep whole seconds: the fault comes after the start
	setGPUHealth(t, large, kubelet.Node, corev1.ConditionFalse, "Xid 79: GPU has fallen off the bus")
	failPodOn(t, large, pod, 1, "CUDA error")

	key := evidence.Key{Namespace: f.ns, Run: run.Name, Attempt: 1}
	waitFor(t, 90*time.Second, "the first attempt to end and its bundle to be sealed", func() bool {
		run = getRun(t, f.ns, run.Name)
		has, _ := evidence.Has(ctx, st, key)
		return len(run.Status.Attempts) > 0 && run.Status.Attempts[0].FailureClass != "" && has
	})
	if a := run.Status.Attempts[0]; a.FailureClass != string(taugridv1.FailureGPUFault) || !strings.Contains(a.Reason, "fallen off the bus") || a.Cluster != "large" {
		t.Errorf("attempt 1 ended %s (%q) on cluster %q; want GPUFault from worker large's node", a.FailureClass, a.Reason, a.Cluster)
	}
	rec := sealedRecord(t, st, key)
	if a := rec.Attempts[0]; a.Cluster != "large" {
		t.Errorf("the bundle's attempt names cluster %q, want large", a.Cluster)
	}
	if len(rec.Pods) != 1 || rec.Pods[0].Name != pod.Name || len(rec.Pods[0].Containers) == 0 || ptr.Deref(rec.Pods[0].Containers[0].ExitCode, -1) != 1 {
		t.Errorf("the bundle's pods: %+v; want %s, exited 1", rec.Pods, pod.Name)
	}
	if len(rec.Nodes) != 1 || rec.Nodes[0].Name != kubelet.Node || rec.Nodes[0].GPUHealthy == nil || rec.Nodes[0].GPUHealthy.Status != "False" ||
		rec.Nodes[0].GPUHealthyAtStart != "True (turned False during the attempt)" {
		t.Errorf("the bundle's nodes: %+v; want %s, GPUs healthy at the start and not at the end", rec.Nodes, kubelet.Node)
	}
	if len(rec.Logs) == 0 || rec.Logs[0].Error != "" || rec.Logs[0].Bytes == 0 || rec.Logs[0].Pod != pod.Name {
		t.Fatalf("the bundle's log tails: %+v; want the container's, read from the worker", rec.Logs)
	}
	if tail := artifactOf(t, st, key, rec.Logs[0].Artifact); !strings.Contains(tail, "CUDA error: an illegal memory access") {
		t.Errorf("the bundle's log tail of %s: %q; want the worker pod's last lines", pod.Name, tail)
	}
	attempt1 := client.MatchingLabels{render.LabelRun: run.Name, render.LabelAttempt: "1"}
	waitFor(t, 30*time.Second, "the sealed attempt's Job and pods to go from the worker", func() bool {
		var pods corev1.PodList
		return apierrors.IsNotFound(large.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})) &&
			large.List(ctx, &pods, client.InNamespace(f.ns), attempt1) == nil && len(pods.Items) == 0
	})
	t.Logf("writes to the worker to attempt 1's seal, attempt 2's included: %.0f", m.clusters.(*clusters.Workers).Metrics.Writes("large"))
	eventsFromBoth(t, rec, large, pod)
	noneOfIn(t, st.Root, append([]string{hfToken, workerHFToken}, kubeconfigSecrets(t, "large")...))
	raw, _ := json.Marshal(run)
	for _, s := range kubeconfigSecrets(t, "large") {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the run's status holds worker large's kubeconfig credentials")
		}
	}
}

// artifactOf reads the named artifact of a sealed bundle.
func artifactOf(t *testing.T, st *evidence.FileStore, key evidence.Key, name string) string {
	t.Helper()
	ctx := context.Background()
	raw, err := st.Manifest(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := evidence.ParseManifest(raw)
	for _, a := range m.Artifacts {
		if a.Name == name {
			data, err := st.Blob(ctx, a.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
	t.Fatalf("the bundle has no artifact %s", name)
	return ""
}

// endAttemptsLeft deletes, when the test ends, the Jobs its runs left in
// the manager (a retry the test does not follow), so MultiKueue removes
// them from the workers and their pods hold no node of a later test.
func endAttemptsLeft(t *testing.T, fl *controlplane.Fleet, ns string) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = k8s.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
		// The manager is stopped: no evidence controller lets go of the
		// attempts' Jobs it held on the workers.
		for name := range fl.Workers {
			w := workerClient(t, fl, name)
			var jobs batchv1.JobList
			_ = w.List(ctx, &jobs, client.InNamespace(ns))
			for i := range jobs.Items {
				_ = w.Patch(ctx, &jobs.Items[i], shared.ReleasePatch)
			}
		}
	})
}

// cordonAll marks every node of a worker unschedulable until the test
// ends, so the test's own node is the only one a pod lands on.
func cordonAll(t *testing.T, w client.Client) {
	t.Helper()
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := w.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	set := func(n *corev1.Node, off bool) error {
		orig := n.DeepCopy()
		n.Spec.Unschedulable = off
		return w.Patch(ctx, n, client.MergeFrom(orig))
	}
	for i := range nodes.Items {
		if n := &nodes.Items[i]; !n.Spec.Unschedulable {
			if err := set(n, true); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = set(n, false) })
		}
	}
}

// sealedRecord reads the record of a sealed, verifying bundle.
func sealedRecord(t *testing.T, st *evidence.FileStore, key evidence.Key) *evidence.Record {
	t.Helper()
	ctx := context.Background()
	raw, err := st.Manifest(ctx, key)
	if err != nil {
		t.Fatalf("no sealed bundle for %+v: %v", key, err)
	}
	if r := evidence.Verify(ctx, raw, st); !r.OK() {
		t.Fatalf("the bundle does not verify: %+v", r)
	}
	m, _ := evidence.ParseManifest(raw)
	for _, a := range m.Artifacts {
		if a.Name != evidence.ArtifactRecord {
			continue
		}
		data, err := st.Blob(ctx, a.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		rec := &evidence.Record{}
		if err := yaml.Unmarshal(data, rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	t.Fatal("the bundle has no record")
	return nil
}

// eventsFromBoth checks the record holds the worker's events about the pod
// (only the worker has the pod) and the manager's about the Workload.
func eventsFromBoth(t *testing.T, rec *evidence.Record, worker client.Client, pod *corev1.Pod) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range rec.Events {
		seen[e.Object+" "+e.Reason+" "+e.Message] = true
	}
	for name, c := range map[string]client.Client{"worker": worker, "manager": k8s} {
		about := "Pod/" + pod.Name
		if name == "manager" {
			about = "Workload/" + rec.Kueue.Workload
		}
		var evs corev1.EventList
		if err := c.List(context.Background(), &evs, client.InNamespace(pod.Namespace)); err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, e := range evs.Items {
			if o := e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name; o == about && seen[o+" "+e.Reason+" "+e.Message] {
				found++
			}
		}
		if found == 0 {
			t.Errorf("the bundle holds none of the %s's events about %s (it holds %v)", name, about, seen)
		}
	}
}

// kubeconfigSecrets are what of worker's kubeconfig must never be shown:
// the whole file, its client key and certificate, raw and base64.
func kubeconfigSecrets(t *testing.T, worker string) []string {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: controlplane.KueueNamespace, Name: controlplane.KubeconfigSecret(worker)}, s); err != nil {
		t.Fatal(err)
	}
	raw := s.Data[clusters.KubeconfigKey]
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{string(raw)}
	for _, a := range cfg.AuthInfos {
		for _, b := range [][]byte{a.ClientKeyData, a.ClientCertificateData} {
			if len(b) == 0 {
				continue
			}
			out = append(out, base64.StdEncoding.EncodeToString(b))
			if lines := strings.Split(string(b), "\n"); len(lines) > 2 {
				out = append(out, lines[1]) // a line of the PEM body
			}
		}
		if a.Token != "" {
			out = append(out, a.Token)
		}
	}
	return out
}

// noneOfIn fails when any of secrets is in a file under root.
func noneOfIn(t *testing.T, root string, secrets []string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds a secret (%.12s...)", p, s)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A dispatched run whose pod stays Pending on its worker past the
// platform's start deadline fails with the worker scheduler's reason (the
// manager has no pod to read it from), and ending it ends it on the
// worker: TauGrid deletes the manager's Job and MultiKueue deletes the
// worker's Job, whose pods go with it. No code of TauGrid's reaches into
// the worker to do that.
func TestADispatchedRunPendingPastItsStartDeadlineEndsOnItsWorkerToo(t *testing.T) {
	fl := onFleet(t)
	ctx := context.Background()
	f := newRunFixture(t, "mr2")
	endAttemptsLeft(t, fl, f.ns)
	f.plat.repo.edit("limits.yaml", "ttl_after_finished: 24h\n", "ttl_after_finished: 24h\nstart_deadline: 5s\n")
	f.plat.repo.commit("a short start deadline")
	f.plat.reconcile(t)
	dispatchTenant(t, fl, f, "mr2-a")
	large := workerClient(t, fl, "large")
	cordonAll(t, large)
	m := startManagerWith(t, withWorkers)
	defer m.stop()

	f.research.runRef("late", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/late")
	waitFor(t, 120*time.Second, "the run's first attempt to end past its start deadline", func() bool {
		run = getRun(t, f.ns, run.Name)
		return len(run.Status.Attempts) > 0 && run.Status.Attempts[0].FailureClass != ""
	})
	a := run.Status.Attempts[0]
	// The worker scheduler's words: its nodes cordoned ("unschedulable"),
	// or, when its snapshot holds none of them yet, "no nodes available".
	schedulerSaid := strings.Contains(a.Reason, "unschedulable") || strings.Contains(a.Reason, "no nodes available to schedule pods")
	if a.Cluster != "large" || !strings.Contains(a.Reason, "start deadline") || !schedulerSaid {
		t.Errorf("attempt 1 on cluster %q ended %s: %q; want the start deadline with the worker scheduler's reason", a.Cluster, a.FailureClass, a.Reason)
	}
	attempt1 := client.MatchingLabels{render.LabelRun: run.Name, render.LabelAttempt: "1"}
	waitFor(t, 60*time.Second, "MultiKueue to remove attempt 1's Job and pods from the worker", func() bool {
		var jobs batchv1.JobList
		var pods corev1.PodList
		return large.List(ctx, &jobs, client.InNamespace(f.ns), attempt1) == nil && len(jobs.Items) == 0 &&
			large.List(ctx, &pods, client.InNamespace(f.ns), attempt1) == nil && len(pods.Items) == 0
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: a.Workload}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the manager's Job %s: %v, want it deleted", a.Workload, err)
	}
}

// A worker dropped from clusters.yaml leaves the manager at the next
// platform commit: its MultiKueueCluster goes and no MultiKueueConfig
// names it; dropping clusters.yaml removes every MultiKueue object the
// platform made. The kubeconfig Secrets, made by the platform team, stay.
func TestAWorkerDroppedFromClustersYAMLIsPrunedFromTheManager(t *testing.T) {
	fl := onFleet(t)
	ctx := context.Background()
	f := newRunFixture(t, "mr4")
	f.plat.r.MultiKueueNamespace = controlplane.KueueNamespace
	cq := "mr4-a"
	for _, name := range []string{"large", "small"} {
		w := workerClient(t, fl, name)
		create(t, w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hf"}}, tenantPVC(f.ns))
	}
	f.plat.repo.write("clusters.yaml", clustersYAML(cq, ""))
	f.plat.repo.commit("dispatch to both workers")
	ready(t, f.plat.reconcile(t))
	wantDispatch(t, cq, "large", "small")

	f.plat.repo.write("clusters.yaml", "clusters:\n- name: large\n  kubeconfig_secret: "+controlplane.KubeconfigSecret("large")+"\n  cluster_queues: ["+cq+"]\n")
	f.plat.repo.commit("drop the small worker")
	ready(t, f.plat.reconcile(t))
	wantDispatch(t, cq, "large")
	if err := k8s.Get(ctx, client.ObjectKey{Name: "small"}, &kueue.MultiKueueCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dropped worker's MultiKueueCluster: %v, want it pruned", err)
	}

	f.plat.repo.git("-C", f.plat.repo.work, "rm", "--quiet", "clusters.yaml")
	f.plat.repo.commit("no more workers")
	ready(t, f.plat.reconcile(t))
	for _, o := range []client.Object{&kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: "large"}},
		&kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: clusters.CheckName(cq)}}, &kueue.MultiKueueConfig{ObjectMeta: metav1.ObjectMeta{Name: clusters.CheckName(cq)}}} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s with no clusters.yaml: %v, want it pruned", o, o.GetName(), err)
		}
	}
	mcq := &kueue.ClusterQueue{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: cq}, mcq); err != nil || mcq.Spec.AdmissionChecksStrategy != nil && len(mcq.Spec.AdmissionChecksStrategy.AdmissionChecks) > 0 {
		t.Errorf("ClusterQueue %s still dispatches (%v): %+v", cq, err, mcq.Spec.AdmissionChecksStrategy)
	}
	for _, name := range []string{"large", "small"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: controlplane.KueueNamespace, Name: controlplane.KubeconfigSecret(name)}, &corev1.Secret{}); err != nil {
			t.Errorf("the platform team's kubeconfig Secret of %s: %v, want it kept", name, err)
		}
	}
}

// ready fails unless the platform applied its latest commit.
func ready(t *testing.T, p *taugridv1.TauPlatform) {
	t.Helper()
	if !apimeta.IsStatusConditionTrue(p.Status.Conditions, taugridv1.ConditionReady) || p.Status.Commit != p.Status.LastAttemptedCommit {
		t.Fatalf("the platform's commit is not applied: %+v", p.Status.Conditions)
	}
}

// wantDispatch checks the manager sends ClusterQueue cq's workloads to
// exactly the named workers, each with its MultiKueueCluster.
func wantDispatch(t *testing.T, cq string, workers ...string) {
	t.Helper()
	ctx := context.Background()
	config := &kueue.MultiKueueConfig{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: clusters.CheckName(cq)}, config); err != nil || !slices.Equal(slices.Sorted(slices.Values(config.Spec.Clusters)), workers) {
		t.Errorf("MultiKueueConfig %s lists %v (%v), want %v", clusters.CheckName(cq), config.Spec.Clusters, err, workers)
	}
	for _, w := range workers {
		if err := k8s.Get(ctx, client.ObjectKey{Name: w}, &kueue.MultiKueueCluster{}); err != nil {
			t.Errorf("MultiKueueCluster %s: %v", w, err)
		}
	}
}

// A dispatched run's pods are fenced where they run: the worker gets the
// attempt's NetworkPolicy (MultiKueue copies only the Job), which admits
// the run's own pods and, from the attacker's side, no pod of another
// tenant's namespace nor another run's pod; it is deleted from the worker
// once the run has ended.
func TestADispatchedRunIsFencedOnItsWorkerUntilItEnds(t *testing.T) {
	fl := onFleet(t)
	ctx := context.Background()
	f := newRunFixture(t, "mr3")
	dispatchTenant(t, fl, f, "mr3-a")
	large := workerClient(t, fl, "large")
	cordonAll(t, large)
	if err := fl.Workers["large"].AddNodes(ctx, controlplane.GPUNode("mr3-large")); err != nil {
		t.Fatal(err)
	}
	m := startManagerWith(t, withWorkers)
	defer m.stop()

	f.research.runRef("fenced", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/fenced")
	run = awaitPhase(t, run, taugridv1.PhaseRunning, 120*time.Second, "the run to run on the worker")
	np := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: f.ns, Name: run.Status.Workload.Name}
	if err := large.Get(ctx, key, np); err != nil {
		t.Fatalf("the worker has no NetworkPolicy for the run's pods: %v", err)
	}
	pod := workerPodOf(t, large, run, "1")
	if !selects(t, np.Spec.PodSelector, pod.Labels) || !admits(t, np, f.ns, pod.Labels) {
		t.Errorf("the worker's policy %+v does not fence and admit the run's own pod %v", np.Spec, pod.Labels)
	}
	for what, from := range map[string]struct {
		ns     string
		labels labels.Set
	}{
		"another tenant's pod, with the run's labels": {"mr3-b", labels.Set(pod.Labels)},
		"another run's pod in the same namespace":     {f.ns, labels.Set{render.LabelRun: "someone-else"}},
	} {
		if admits(t, np, from.ns, from.labels) {
			t.Errorf("the worker's policy admits %s", what)
		}
	}
	exitPodOn(t, large, pod, 0)
	waitFor(t, 60*time.Second, "the run to succeed and its fence to leave the worker", func() bool {
		return getRun(t, f.ns, run.Name).Status.Phase == taugridv1.PhaseSucceeded && apierrors.IsNotFound(large.Get(ctx, key, &networkingv1.NetworkPolicy{}))
	})
}

// The janitor judges a dispatched Workload by its pods on the worker: a
// TauGrid Job no run follows any more (its run deleted, the Job left) is
// idle only if no pod of it runs there. Read from the manager alone (no
// pods ever), it would be released while it runs.
func TestTheJanitorReadsADispatchedJobsPodsFromItsWorker(t *testing.T) {
	fl := onFleet(t)
	ctx := context.Background()
	f := newRunFixture(t, "mr5")
	dispatchTenant(t, fl, f, "mr5-a")
	cordonAll(t, workerClient(t, fl, "large"))
	if err := fl.Workers["large"].AddNodes(ctx, controlplane.GPUNode("mr5-large")); err != nil {
		t.Fatal(err)
	}
	m := startManagerWith(t, withWorkers)
	f.research.runRef("left", "target: default\n")
	f.poll(t)
	run := f.runOf(t, "refs/tau/runs/left")
	run = awaitPhase(t, run, taugridv1.PhaseRunning, 120*time.Second, "the run to run on the worker")
	m.stop()
	job := run.Status.Workload.Name
	// The manager runs no garbage collector: the Job outlives its run.
	if err := k8s.Delete(ctx, run); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the run to be gone", func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(run), &taugridv1.TauRun{}))
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: job}, &batchv1.Job{}); err != nil {
		t.Fatalf("the run's Job in the manager: %v", err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: job}},
			client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	idle := "Job/" + f.ns + "/" + job
	sweep := func(c clusters.Locator) []janitor.Finding {
		j := &janitor.Janitor{Client: k8s, Clock: clock.RealClock{}, Recorder: events.NewFakeRecorder(100), Log: logr.Discard(), Mode: janitor.JanitorReport,
			EndedAfter: time.Hour, Clusters: c}
		found, err := j.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(found, func(f janitor.Finding) bool { return f.Object != idle })
	}
	workers := &clusters.Workers{Local: &clusters.Pods{Reader: k8s}, Manager: k8s, Namespace: controlplane.KueueNamespace, Scheme: scheme}
	if found := sweep(workers); len(found) != 0 {
		t.Errorf("the janitor finds %+v about a job whose pod runs on its worker", found)
	}
	if found := sweep(nil); len(found) != 1 || found[0].Reason != janitor.ReasonIdleReservation {
		t.Errorf("read from the manager alone, the janitor finds %+v; want it idle (the test would prove nothing otherwise)", found)
	}
}

// A worker whose API cannot be reached leaves a note in the bundle and
// an error, neither quoting its kubeconfig's token.
func TestAnUnreachableWorkersCredentialsAreInNoNoteOrError(t *testing.T) {
	onFleet(t)
	ctx := context.Background()
	const token = "tok-never-shown-0123456789abcdef"
	kubeconfig := "apiVersion: v1\nkind: Config\ncurrent-context: gone\n" +
		"clusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:1\n" +
		"contexts:\n- name: gone\n  context:\n    cluster: gone\n    user: gone\n" +
		"users:\n- name: gone\n  user:\n    token: " + token + "\n"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.KueueNamespace, Name: "mr6-gone-kubeconfig"},
		Data: map[string][]byte{clusters.KubeconfigKey: []byte(kubeconfig)}}
	mkc := clusters.Cluster(clusters.Worker{Name: "mr6-gone", Secret: secret.Name})
	create(t, k8s, secret, mkc)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), mkc); _ = k8s.Delete(context.Background(), secret) })
	workers := &clusters.Workers{Local: &clusters.Pods{Reader: k8s}, Manager: k8s, Namespace: controlplane.KueueNamespace, Scheme: scheme,
		CallTimeout: 2 * time.Second}

	p, err := workers.PodsOf(ctx, "mr6-gone")
	if err != nil {
		t.Fatal(err)
	}
	err = p.Reader.List(ctx, &corev1.PodList{}, client.InNamespace("default"))
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("listing pods on the unreachable worker: %v; want an error without its token", err)
	}
	run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mr6"},
		Status: taugridv1.TauRunStatus{Attempts: []taugridv1.Attempt{{Number: 1, Cluster: "mr6-gone"}}}}
	c := &sealing.Collection{Run: run, Attempt: 1, Rec: &evidence.Record{}, Masker: evidence.NewMasker()}
	e := &sealing.EvidenceRecorder{Client: k8s, APIReader: k8s, Clusters: workers}
	c.At = e.ClusterOf(ctx, c)
	if pods, err := c.AttemptPods(ctx); err != nil || len(pods) != 0 {
		t.Errorf("the unreachable worker's pods: %v, %v; want none, noted", pods, err)
	}
	notes := strings.Join(c.Rec.Notes, "\n")
	if !strings.Contains(notes, "worker cluster mr6-gone") || strings.Contains(notes, token) {
		t.Errorf("the bundle's notes %q: want the worker named, its token not", notes)
	}
}
