package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/hack/devcluster/cluster"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// demoTopology is the Topology the platform team declares in the demo: the
// fake nodes' block and rack labels, then the host.
var demoTopology = fmt.Sprintf(`# The network topology of the GPU nodes, widest level first. Kueue places
# the pods of a run with compute.placement: same-rack inside one rack.
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: gpu-fabric
spec:
  levels:
  - nodeLabel: %s
  - nodeLabel: %s
  - nodeLabel: kubernetes.io/hostname
`, cluster.BlockLabel, cluster.RackLabel)

// The platform commit that turns topology-aware placement on: the Topology,
// the h200 flavor placed by it, and the h200-8 profile on it.
var topologyEdits = []edit{
	{"kueue/flavors.yaml", "spec:\n  nodeLabels:\n", "spec:\n  topologyName: gpu-fabric\n  nodeLabels:\n"},
	{"profiles.yaml", "- name: h200-8\n", "- name: h200-8\n  topology: gpu-fabric\n"},
}

// rackTau is the researcher's two-node run kept in one rack.
const rackTau = `# Two whole nodes in one rack, so NCCL traffic stays on the rack's switch.
schema_version: 1
name: mnist-rack
entrypoint: train.py
args: ["--epochs", "2"]
runtime:
  image: nvcr.io/nvidia/pytorch:25.01-py3
execution:
  launcher: torchrun
compute:
  nodes: 2
  gpus: 8
  placement: same-rack
policy:
  profile: h200-8
limits:
  timeout: 1h
`

// topology shows topology-aware placement: the platform team declares the
// fake nodes' blocks and racks, a researcher runs a 2-node run with
// placement same-rack, and the demo prints where Kueue put its pods.
func (d *demo) topology(ctx context.Context) error {
	d.say("the platform team declares the nodes' topology (kueue/topology.yaml: block, rack, host; flavor h200 and profile h200-8 placed by it)")
	if err := d.declareTopology(ctx); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.research, "tau", "rack.yaml"), []byte(rackTau), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"-C", d.research, "add", "tau/rack.yaml"}, {"-C", d.research, "commit", "--quiet", "-m", "a 2-node run in one rack"}} {
		if _, err := gittest.Git(d.gitEnv, "", nil, args...); err != nil {
			return err
		}
	}
	placed, stop, err := d.watchPlacements(ctx)
	if err != nil {
		return err
	}
	defer stop()
	d.say("tau run rack --wait  (tau/rack.yaml: compute.nodes: 2, compute.placement: same-rack)")
	out, err := d.tauCmd(ctx, "run", "rack", "--wait")
	if err != nil {
		return err
	}
	run, err := d.runNamed(ctx, runID(out))
	if err != nil {
		return err
	}
	return d.showPlacement(ctx, run, placed(run))
}

// runNamed is the name of the TauRun that tau's run id requested.
func (d *demo) runNamed(ctx context.Context, id string) (string, error) {
	var runs taugridv1.TauRunList
	if err := d.k8s.List(ctx, &runs, client.InNamespace("team-a")); err != nil {
		return "", err
	}
	for _, r := range runs.Items {
		if r.Spec.Trigger.Ref == "refs/tau/runs/"+id {
			return r.Name, nil
		}
	}
	return "", fmt.Errorf("no TauRun for run %q", id)
}

// declareTopology commits and pushes the topology to the platform repo and
// waits until the controller has it in force.
func (d *demo) declareTopology(ctx context.Context) error {
	if err := applyEdits(d.platform, topologyEdits); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.platform, "kueue", "topology.yaml"), []byte(demoTopology), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"-C", d.platform, "add", "-A"}, {"-C", d.platform, "commit", "--quiet", "-m", "topology-aware placement"}, {"-C", d.platform, "push", "--quiet", "origin", "main"}} {
		if _, err := gittest.Git(d.gitEnv, "", nil, args...); err != nil {
			return err
		}
	}
	sha, err := gittest.Git(d.gitEnv, "", nil, "-C", d.platform, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	sha = strings.TrimSpace(sha)
	return d.poll(ctx, 90*time.Second, func() (bool, string, error) {
		p := &taugridv1.TauPlatform{}
		if err := d.k8s.Get(ctx, types.NamespacedName{Name: "default"}, p); err != nil {
			return false, "", err
		}
		if c := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionStalled); p.Status.LastAttemptedCommit == sha && c != nil && c.Status == "True" {
			return false, "", fmt.Errorf("the platform refused the topology commit: %s", c.Message)
		}
		return p.Status.Commit == sha, fmt.Sprintf("platform policy in force at commit %.12s", sha), nil
	})
}

// placedPod is where a pod ran, and whether Kueue's topology assignment
// pinned it there (its node selector names the host).
type placedPod struct {
	node   string
	pinned bool
}

// watchPlacements records the node of every run pod bound in team-a from
// now on, by run; placed returns the pods it saw of one run.
func (d *demo) watchPlacements(ctx context.Context) (placed func(run string) map[string]placedPod, stop func(), err error) {
	cfg, err := d.cluster.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: d.k8s.Scheme()})
	if err != nil {
		return nil, nil, err
	}
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace("team-a"), client.HasLabels{render.LabelRun})
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	seen := map[string]map[string]placedPod{}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || pod.Spec.NodeName == "" {
				continue
			}
			mu.Lock()
			run := pod.Labels[render.LabelRun]
			if seen[run] == nil {
				seen[run] = map[string]placedPod{}
			}
			seen[run][pod.Name] = placedPod{pod.Spec.NodeName, pod.Spec.NodeSelector[corev1.LabelHostname] == pod.Spec.NodeName}
			mu.Unlock()
		}
	}()
	placed = func(run string) map[string]placedPod {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen[run])
	}
	return placed, w.Stop, nil
}

// showPlacement prints the run's pods with the block and rack of their
// nodes, and fails unless Kueue pinned them to two hosts of one rack.
func (d *demo) showPlacement(ctx context.Context, run string, pods map[string]placedPod) error {
	racks := map[string]bool{}
	hosts := map[string]bool{}
	pinned := 0
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		n := &corev1.Node{}
		if err := d.k8s.Get(ctx, client.ObjectKey{Name: pods[name].node}, n); err != nil {
			return err
		}
		where := n.Labels[cluster.BlockLabel] + "/" + n.Labels[cluster.RackLabel]
		racks[where], hosts[n.Name] = true, true
		how := "placed by the scheduler alone"
		if pods[name].pinned {
			how, pinned = "pinned there by Kueue's topology assignment", pinned+1
		}
		d.say("  pod %s ran on %s (%s), %s", name, n.Name, where, how)
	}
	if len(pods) != 2 || len(hosts) != 2 || len(racks) != 1 || pinned != 2 {
		return fmt.Errorf("run %s: want its 2 pods on 2 hosts of one rack, saw %v", run, pods)
	}
	d.say("Kueue kept run %s in one rack, one pod per host", run)
	return nil
}

// runID is the run id ("r-...") tau printed.
func runID(out string) string {
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "r-") {
			return f
		}
	}
	return ""
}
