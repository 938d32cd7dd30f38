package run

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// RayNodeType is the label KubeRay puts on a Ray cluster's pods: head or
// worker. The submitter pod of a RayJob has none.
const RayNodeType = "ray.io/node-type"

// running reports whether the attempt's entrypoint runs: every pod it needs
// (every rank of a Job; the Ray head and every Ray worker) has all its
// containers running, and for Ray the job has been handed to the cluster.
// A Job's active count is no evidence: it counts pods still Pending.
func running(o Observed) bool {
	switch {
	case o.Job != nil && suspended(o.Job):
		return false
	case o.RayJob != nil && o.RayJob.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning:
		return false
	}
	want, up := wantedPods(o), 0
	for i := range o.Pods {
		if p := &o.Pods[i]; runsEntrypoint(o, p) && PodRunning(p) {
			up++
		}
	}
	return want > 0 && up >= want
}

// wantedPods is how many pods must run for the entrypoint to run.
func wantedPods(o Observed) int {
	switch {
	case o.Job != nil:
		if p := o.Job.Spec.Parallelism; p != nil {
			return int(*p)
		}
		return 1
	case o.RayJob != nil:
		n := 1 // the head
		if s := o.RayJob.Spec.RayClusterSpec; s != nil {
			for _, g := range s.WorkerGroupSpecs {
				replicas, hosts := int32(1), max(g.NumOfHosts, 1)
				if g.Replicas != nil {
					replicas = *g.Replicas
				}
				n += int(replicas * hosts)
			}
		}
		return n
	}
	return 0
}

// runsEntrypoint is a pod of the attempt that runs the entrypoint: any
// pod of a Job; for a RayJob its head and workers, not the submitter,
// which only hands the job over.
func runsEntrypoint(o Observed, p *corev1.Pod) bool {
	if o.RayJob == nil {
		return true
	}
	t := p.Labels[RayNodeType]
	return t == "head" || t == "worker"
}

// PodRunning is a pod whose every container runs, and that is not going.
func PodRunning(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Spec.Containers {
		i := slices.IndexFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == c.Name })
		if i < 0 || p.Status.ContainerStatuses[i].State.Running == nil {
			return false
		}
	}
	return true
}

// startingMessage says, in the pods' own terms, what an admitted attempt
// that does not run yet is waiting for: a pod no node fits (with what it
// asks for and the scheduler's words), an image that does not pull, an
// init container or a container that fails (held), or else how far the
// pods are.
func startingMessage(o Observed) (msg string, held bool) {
	// Any pod can hold the attempt, a Ray job's submitter too.
	if _, reason, ok := startFailure(o.Pods, o.Nodes); ok {
		return "admitted, not starting: " + reason, true
	}
	return startingProgress(o), false
}

// startingProgress says how far the pods of an admitted attempt that
// nothing holds have come.
func startingProgress(o Observed) string {
	want, have := wantedPods(o), 0
	counts := map[string]int{}
	up := 0
	for i := range o.Pods {
		p := &o.Pods[i]
		switch {
		case !runsEntrypoint(o, p):
		case PodRunning(p):
			have++
			up++
		default:
			have++
			counts[podWait(p)]++
		}
	}
	if have == 0 {
		// Kueue admits the Workload first and then unsuspends its Job: on
		// a busy cluster that is seconds to minutes (hack/scale: 1,385
		// admitted Workloads, 18 Jobs unsuspended), and "creating its pods"
		// would claim more than the cluster shows.
		switch {
		case o.Job != nil && suspended(o.Job):
			return "admitted; waiting for Kueue to start the Job (still suspended)"
		case o.RayJob != nil && o.RayJob.Spec.Suspend:
			return "admitted; waiting for Kueue to start the RayJob (still suspended)"
		}
		if o.RayJob != nil {
			return fmt.Sprintf("admitted; KubeRay is creating the Ray cluster (0 of %d pods)", want)
		}
		return fmt.Sprintf("admitted; the Job is creating its pods (0 of %d)", want)
	}
	if up >= want && o.RayJob != nil {
		return fmt.Sprintf("Ray cluster up (%d of %d pods running); submitting the Ray job", up, want)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	if missing := want - have; missing > 0 {
		parts = append(parts, fmt.Sprintf("%d not created yet", missing))
	}
	return fmt.Sprintf("admitted, starting: %d of %d pods running (%s)", up, want, strings.Join(parts, ", "))
}

// podWait names the stage a pod that does not run yet is in.
func podWait(p *corev1.Pod) string {
	switch {
	case p.DeletionTimestamp != nil:
		return "ending"
	case p.Spec.NodeName == "":
		return "waiting for the scheduler"
	case p.Status.Phase == corev1.PodPending && len(p.Spec.InitContainers) > 0 && !initDone(p):
		return "running init containers"
	case p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning:
		return "starting containers"
	}
	return strings.ToLower(string(p.Status.Phase))
}

func initDone(p *corev1.Pod) bool {
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; t == nil || t.ExitCode != 0 {
			return false
		}
	}
	return len(p.Status.InitContainerStatuses) == len(p.Spec.InitContainers)
}

// startFailure says why an admitted attempt's pods are not running: an image
// that does not pull, an init container that fails, a crash-looping
// container, pods the scheduler cannot place. ok is false when the pods
// show no such cause. Given the cluster's nodes, a pod no node could hold
// even empty is told apart from one waiting for room.
func startFailure(pods []corev1.Pod, nodes []corev1.Node) (taugridv1.FailureClass, string, bool) {
	if class, reason, ok := imagePull(FailureEvidence{Pods: pods}); ok {
		return class, reason, true
	}
	for i := range pods {
		if class, reason, ok := containerFailure(&pods[i]); ok {
			return class, reason, true
		}
	}
	for i := range pods {
		p := &pods[i]
		c := unscheduled(p)
		if c == nil {
			continue
		}
		never := ""
		if nodes != nil && !slices.ContainsFunc(nodes, func(n corev1.Node) bool { return CouldHold(&n, p) }) {
			never = ", even empty"
		}
		return taugridv1.FailureInfrastructure, fmt.Sprintf("no node fits %s%s: %s; pod %s %s", podRole(p), never, schedulerReason(c.Message), p.Name, podRequests(p)), true
	}
	return "", "", false
}

// containerFailure finds a container of p that keeps failing to start.
func containerFailure(p *corev1.Pod) (taugridv1.FailureClass, string, bool) {
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return taugridv1.FailureInfrastructure, fmt.Sprintf("init container %s of pod %s exited with code %d (%s)", cs.Name, p.Name, t.ExitCode, t.Reason), true
		}
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		w := cs.State.Waiting
		switch {
		case w == nil:
		case w.Reason == "CrashLoopBackOff":
			reason := fmt.Sprintf("container %s of pod %s is crash-looping (%d restarts", cs.Name, p.Name, cs.RestartCount)
			if t := cs.LastTerminationState.Terminated; t != nil {
				reason += fmt.Sprintf(", last exit %d, %s", t.ExitCode, t.Reason)
			}
			return taugridv1.FailureUserError, reason + ")", true
		case w.Reason == "CreateContainerConfigError" || w.Reason == "CreateContainerError":
			return taugridv1.FailureUserError, fmt.Sprintf("container %s of pod %s cannot start: %s", cs.Name, p.Name, w.Message), true
		}
	}
	return "", "", false
}

// PodRequestTotals sums the requests of a pod's containers.
func PodRequestTotals(p *corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for name, q := range c.Resources.Requests {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return total
}

// unscheduled is the condition by which the scheduler said no node fits
// p, or nil.
func unscheduled(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

// podRole names what a pod is to the run: the Ray head or a Ray worker, a
// rank of a multi-node Job, or the pod.
func podRole(p *corev1.Pod) string {
	switch p.Labels[RayNodeType] {
	case "head":
		return "the Ray head"
	case "worker":
		return "a Ray worker"
	}
	if i, ok := p.Annotations["batch.kubernetes.io/job-completion-index"]; ok {
		return "rank " + i
	}
	return "the pod"
}

// schedulerReason is the scheduler's verdict on the nodes ("0/2 nodes are
// available: 2 Insufficient nvidia.com/gpu"), without what it says of
// preemption, which is Kueue's business here.
func schedulerReason(msg string) string {
	msg, _, _ = strings.Cut(msg, " preemption:")
	return strings.TrimSuffix(strings.TrimSpace(msg), ".")
}

// podRequests is what a pod asks of a node, accelerators first:
// "8 nvidia.com/gpu, 96 cpu, 1Ti memory".
func podRequests(p *corev1.Pod) string {
	total := PodRequestTotals(p)
	var out []string
	for _, name := range slices.Sorted(maps.Keys(total)) {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
			out = append(out, quantity(total[name], string(name)))
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := total[name]; ok {
			out = append(out, quantity(q, string(name)))
		}
	}
	if len(out) == 0 {
		return "no requests"
	}
	return "needs " + strings.Join(out, ", ")
}

func quantity(q resource.Quantity, name string) string { return q.String() + " " + name }

// CouldHold is whether node n, were it empty, could take pod p: it is
// schedulable, carries the labels p selects, its taints are tolerated and
// its allocatable covers p's requests. These are necessary, not
// sufficient (affinity and topology are not judged), so a pod no node could
// hold will not start until the cluster changes; one some node could hold
// waits for room.
func CouldHold(n *corev1.Node, p *corev1.Pod) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for k, v := range p.Spec.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), t, false) }) {
			return false
		}
	}
	for name, want := range PodRequestTotals(p) {
		if have, ok := n.Status.Allocatable[name]; !ok || have.Cmp(want) < 0 {
			return false
		}
	}
	return true
}
