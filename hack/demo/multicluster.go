package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/render"
	"github.com/taugrid/taugrid/test/controlplane"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The multicluster mode's workers: east has a GPU node with 8 free H200s
// and team-a's quota for them; west has a GPU node too, and no GPU quota
// for team-a (its own ClusterQueue, kueue/workers/west/).
const (
	freeWorker = "east"
	fullWorker = "west"
	gpuNode    = "east-gpu-0" // east's node, whose log the demo's kubelet serves
)

// fleetClustersYAML declares the workers in the platform repo.
var fleetClustersYAML = fmt.Sprintf(`# The worker clusters team-a's runs are dispatched to (MultiKueue).
clusters:
- name: %s
  kubeconfig_secret: %s
  cluster_queues: [team-a]
- name: %s
  kubeconfig_secret: %s
  cluster_queues: [team-a]
`, freeWorker, controlplane.KubeconfigSecret(freeWorker), fullWorker, controlplane.KubeconfigSecret(fullWorker))

// westQueue is the copy of team-a's ClusterQueue west gets: no GPUs.
const westQueue = `# West's own copy of team-a's ClusterQueue: CPUs only, no GPU quota.
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h200
      resources:
      - name: cpu
        nominalQuota: "96"
      - name: memory
        nominalQuota: 1024Gi
      - name: nvidia.com/gpu
        nominalQuota: 0
`

// The lines the demo's training pod writes, which tau logs -f must stream.
var trainLines = []string{
	"epoch 1/2  loss 0.412  (on east-gpu-0)",
	"epoch 2/2  loss 0.187  (on east-gpu-0)",
	"saved checkpoint step-938",
}

// fleet is the multicluster mode's manager and workers, with east's
// stand-in kubelet.
type fleet struct {
	*controlplane.Fleet
	workers map[string]client.Client
	kubelet *controlplane.Kubelet
	stopped context.CancelFunc // ends the kubelet and its Lease renewal
}

func (f *fleet) stop() error {
	f.stopped()
	errs := []error{f.Manager.Stop()}
	for _, w := range f.Workers {
		errs = append(errs, w.Stop())
	}
	return errors.Join(errs...)
}

// fleetSteps start a MultiKueue manager and two workers instead of the
// local cluster, and the controller as the manager's.
func (d *demo) fleetSteps() []struct {
	say string
	do  func(context.Context) error
} {
	d.platformFiles = map[string]string{"clusters.yaml": fleetClustersYAML, "kueue/workers/west/cluster-queues.yaml": westQueue}
	// A worker's pods name their service account: the test control
	// planes default none (no ServiceAccount admission), and the preflight
	// checks that each worker has it.
	d.platformEdits = []edit{{"tenants.yaml", "  namespace: team-a\n", "  namespace: team-a\n  service_account: default\n"}}
	d.ctrlArgs = []string{"--multikueue-namespace", controlplane.KueueNamespace}
	return []struct {
		say string
		do  func(context.Context) error
	}{
		{fmt.Sprintf("starting a MultiKueue manager and two workers, each its own API server, etcd and Kueue (%s: a node with 8 free H200s; %s: no GPU quota for team-a)", freeWorker, fullWorker), d.startFleet},
		{"starting a local git server with the example platform repo (plus clusters.yaml naming both workers) and research repo", d.startGit},
		{"starting tau-controller in the manager (--multikueue-namespace " + controlplane.KueueNamespace + ")", d.launchController},
		{"registering the platform repo (TauPlatform) and the research repo (TauRepository in team-a)", d.register},
	}
}

// startFleet starts the fleet and provisions what a platform team
// provisions in each worker itself: team-a's namespace, data volume and
// Secret, and the GPU nodes.
func (d *demo) startFleet(ctx context.Context) error {
	fl, err := controlplane.StartFleet(ctx, controlplane.FleetOptions{
		Workers: []string{freeWorker, fullWorker}, CRDDirectoryPaths: []string{filepath.Join(d.root, "api", "crds")}})
	if err != nil {
		return err
	}
	nodeCtx, stopNodes := context.WithCancel(context.Background())
	d.fleet = &fleet{Fleet: fl, workers: map[string]client.Client{}, stopped: stopNodes}
	d.kubecfg = fl.Manager.Kubeconfig
	if d.k8s, err = client.New(fl.Manager.Config, client.Options{Scheme: fl.Manager.Scheme}); err != nil {
		return err
	}
	if err := taugridv1.AddToScheme(d.k8s.Scheme()); err != nil {
		return err
	}
	// The local cluster of the plain demo has team-a's namespace; here the
	// manager gets it before the TauRepository in it.
	if err := d.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		return err
	}
	for name, w := range fl.Workers {
		c, err := client.New(w.Config, client.Options{Scheme: w.Scheme})
		if err != nil {
			return err
		}
		d.fleet.workers[name] = c
		if err := provisionTenant(ctx, c); err != nil {
			return fmt.Errorf("worker %s: %w", name, err)
		}
	}
	if err := fl.Workers[fullWorker].AddNodes(ctx, controlplane.GPUNode(fullWorker+"-gpu-0")); err != nil {
		return err
	}
	d.fleet.kubelet, err = controlplane.RunGPUKubelet(nodeCtx, d.fleet.workers[freeWorker], gpuNode, time.Now())
	if err != nil {
		return fmt.Errorf("worker %s: %w", freeWorker, err)
	}
	d.say("  %s: node %s (8 H200s, its pods' logs served); %s: node %s-gpu-0 (8 H200s, no quota for team-a)", freeWorker, gpuNode, fullWorker, fullWorker)
	return nil
}

// provisionTenant creates team-a's namespace, PVC and Secret in a worker:
// TauGrid makes namespaces and queues there, never data, and refuses a
// platform commit whose worker lacks them.
func provisionTenant(ctx context.Context, c client.Client) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "team-a-data"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hf"}, StringData: map[string]string{"token": "demo-hf-token"}},
		// The worker runs no service-account controller to make it.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// multicluster pushes a run tag and follows the run to the worker with
// free GPUs: its pod there, tau status naming the cluster, tau logs -f
// streaming the pod's lines from the worker, and the run's end.
func (d *demo) multicluster(ctx context.Context) error {
	tag := "run/demo-" + time.Now().UTC().Format("20060102-150405")
	for _, args := range [][]string{{"-C", d.research, "tag", tag}, {"-C", d.research, "push", "--quiet", "origin", tag}} {
		if _, err := gittest.Git(d.gitEnv, "", nil, args...); err != nil {
			return err
		}
	}
	d.say("git push origin %s  (the researcher's only step, as on one cluster)", tag)
	pod, err := d.dispatchedPod(ctx, "refs/tags/"+tag)
	if err != nil {
		return fmt.Errorf("%w (controller log: %s)\n%s", err, d.ctrlLog, d.fleetState(ctx))
	}
	run := pod.Labels[render.LabelRun]
	d.say("the manager's Kueue dispatched it to %s: pod %s on node %s (%s has none)", freeWorker, pod.Name, pod.Spec.NodeName, fullWorker)
	w := d.fleet.workers[freeWorker]
	if err := setPod(ctx, w, pod, runningPod); err != nil {
		return err
	}
	if err := d.waitRun(ctx, run, func(r *taugridv1.TauRun) (bool, error) {
		if r.Status.Phase != taugridv1.PhaseRunning {
			return false, nil
		}
		if r.Status.Workload == nil || r.Status.Workload.Cluster != freeWorker {
			return false, fmt.Errorf("run %s is running, its status says on cluster %q, want %s", run, clusterOf(r), freeWorker)
		}
		return true, nil
	}); err != nil {
		return err
	}
	d.say("tau status %s", run)
	out, err := d.tauCmd(ctx, "status", run)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "on cluster "+freeWorker) {
		return fmt.Errorf("tau status does not name cluster %s", freeWorker)
	}
	if err := d.streamLogs(ctx, run, pod); err != nil {
		return err
	}
	d.say("the pod on %s exits 0", freeWorker)
	if err := setPod(ctx, w, pod, succeededPod); err != nil {
		return err
	}
	page := ""
	if err := d.waitRun(ctx, run, func(r *taugridv1.TauRun) (bool, error) {
		switch r.Status.Phase {
		case taugridv1.PhaseSucceeded:
			page = r.Status.EvidenceURL
			return true, nil
		case taugridv1.PhaseFailed, taugridv1.PhaseCancelled:
			return false, fmt.Errorf("the run ended %s: %s", r.Status.Phase, r.Status.Message)
		}
		return false, nil
	}); err != nil {
		return err
	}
	return d.evidence(ctx, page)
}

func clusterOf(r *taugridv1.TauRun) string {
	if r.Status.Workload == nil {
		return ""
	}
	return r.Status.Workload.Cluster
}

// dispatchedPod waits for the pod of the run of ref to be bound to a node
// of the free worker, and fails if the full worker holds one.
func (d *demo) dispatchedPod(ctx context.Context, ref string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	run, last := "", ""
	err := d.poll(ctx, 2*time.Minute, func() (bool, string, error) {
		if run == "" {
			var list taugridv1.TauRunList
			if err := d.k8s.List(ctx, &list, client.InNamespace("team-a")); err != nil {
				return false, "", err
			}
			for _, r := range list.Items {
				if r.Spec.Trigger.Ref == ref && r.Status.Phase != "" {
					run = r.Name
					if line := fmt.Sprintf("TauRun %s: %s", r.Name, strings.ToLower(string(r.Status.Phase))); line != last {
						last = line
						d.say("%s", line)
					}
				}
			}
			if run == "" {
				return false, "", nil
			}
		}
		var pods corev1.PodList
		if err := d.fleet.workers[fullWorker].List(ctx, &pods, client.InNamespace("team-a"), client.MatchingLabels{render.LabelRun: run}); err != nil || len(pods.Items) > 0 {
			return false, "", errors.Join(err, fmt.Errorf("worker %s, which has no GPU quota for team-a, holds a pod of run %s", fullWorker, run))
		}
		if err := d.fleet.workers[freeWorker].List(ctx, &pods, client.InNamespace("team-a"), client.MatchingLabels{render.LabelRun: run}); err != nil {
			return false, "", err
		}
		if len(pods.Items) == 1 && pods.Items[0].Spec.NodeName != "" {
			pod = &pods.Items[0]
			return true, "", nil
		}
		return false, "", nil
	})
	return pod, err
}

// waitRun polls the TauRun named run, printing its phase changes, until
// done says so or fails.
func (d *demo) waitRun(ctx context.Context, run string, done func(*taugridv1.TauRun) (bool, error)) error {
	last := ""
	err := d.poll(ctx, 2*time.Minute, func() (bool, string, error) {
		r := &taugridv1.TauRun{}
		if err := d.k8s.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: run}, r); err != nil {
			return false, "", err
		}
		line := fmt.Sprintf("TauRun %s: %s", run, strings.ToLower(string(r.Status.Phase)))
		if c := clusterOf(r); c != "" {
			line += ", on cluster " + c
		}
		if line != last {
			last = line
			d.say("%s", line)
		}
		ok, err := done(r)
		return ok, "", err
	})
	if err != nil {
		return fmt.Errorf("%w (controller log: %s)", err, d.ctrlLog)
	}
	return nil
}

// streamLogs runs tau logs -f through the runs API while the pod on the
// worker writes its lines, one at a time: each must reach tau's output
// before the next is written. The stream ends when the container does.
func (d *demo) streamLogs(ctx context.Context, run string, pod *corev1.Pod) error {
	d.say("tau logs -f %s  (through the controller's API, which reads the pod's log on %s)", run, freeWorker)
	out := &syncBuffer{}
	cmd := exec.CommandContext(ctx, d.tau, "logs", "-f", run, "-n", "team-a")
	cmd.Dir = d.research
	cmd.Env = append(append(os.Environ(), d.gitEnv...), "TAU_API_URL="+d.apiURL, "TAU_TOKEN="+demoToken, "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = out, indent(os.Stderr)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	container := pod.Spec.Containers[0].Name
	for _, line := range trainLines {
		d.fleet.kubelet.Write(pod.Namespace, pod.Name, container, line+"\n")
		err := d.poll(ctx, 30*time.Second, func() (bool, string, error) {
			select {
			case err := <-exited:
				return false, "", fmt.Errorf("tau logs -f ended before streaming %q: %w; it printed %q", line, err, out.String())
			default:
			}
			return strings.Contains(out.String(), line), "", nil
		})
		if err != nil {
			_ = cmd.Process.Kill()
			return fmt.Errorf("%w (controller log: %s)", err, d.ctrlLog)
		}
		d.say("  streamed: %s", line)
	}
	d.fleet.kubelet.Exit(pod.Namespace, pod.Name, container)
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("tau logs -f: %w (controller log: %s)", err, d.ctrlLog)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return errors.New("tau logs -f did not end within 30 s of the container's end")
	}
	d.say("tau logs -f ended with the container")
	return nil
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runningPod and succeededPod write a pod's status as a kubelet would
// when its containers start and when they exit 0.
func runningPod(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &now
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	p.Status.Conditions = append(p.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
}

func succeededPod(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		cs.Ready, cs.Started = false, ptr.To(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status = corev1.ConditionFalse
		}
	}
}

// setPod changes a pod's status on its latest copy (the Job controller
// writes it too).
func setPod(ctx context.Context, c client.Client, p *corev1.Pod, change func(*corev1.Pod)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		change(cur)
		return c.Status().Update(ctx, cur)
	})
}

// fleetState is what the manager and the workers hold of team-a's runs:
// each Workload's conditions and each pod's phase and node, for an error.
func (d *demo) fleetState(ctx context.Context) string {
	var b strings.Builder
	clients := map[string]client.Client{"manager": d.k8s}
	for name, c := range d.fleet.workers {
		clients[name] = c
	}
	for name, c := range clients {
		var wls kueue.WorkloadList
		if err := c.List(ctx, &wls, client.InNamespace("team-a")); err != nil {
			fmt.Fprintf(&b, "%s: listing Workloads: %v\n", name, err)
		}
		for _, wl := range wls.Items {
			fmt.Fprintf(&b, "%s: Workload %s:", name, wl.Name)
			for _, c := range wl.Status.Conditions {
				fmt.Fprintf(&b, " %s=%s (%s)", c.Type, c.Status, c.Message)
			}
			for _, a := range wl.Status.AdmissionChecks {
				fmt.Fprintf(&b, " check %s=%s (%s)", a.Name, a.State, a.Message)
			}
			b.WriteString("\n")
		}
		var jobs batchv1.JobList
		_ = c.List(ctx, &jobs, client.InNamespace("team-a"))
		for _, j := range jobs.Items {
			fmt.Fprintf(&b, "%s: Job %s suspended %v active %d:", name, j.Name, ptr.Deref(j.Spec.Suspend, false), j.Status.Active)
			for _, c := range j.Status.Conditions {
				fmt.Fprintf(&b, " %s=%s (%s)", c.Type, c.Status, c.Message)
			}
			b.WriteString("\n")
		}
		var events corev1.EventList
		_ = c.List(ctx, &events, client.InNamespace("team-a"))
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "%s: event on %s %s: %s: %s\n", name, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		var pods corev1.PodList
		_ = c.List(ctx, &pods, client.InNamespace("team-a"))
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "%s: pod %s %s on %q:", name, p.Name, p.Status.Phase, p.Spec.NodeName)
			for _, c := range p.Status.Conditions {
				fmt.Fprintf(&b, " %s=%s (%s)", c.Type, c.Status, c.Message)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
