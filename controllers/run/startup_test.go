package run

import (
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// What an admitted attempt that does not run says, in its pods' terms.
func TestStartingMessageSaysWhatThePodsWaitFor(t *testing.T) {
	twoRanks := &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr.To(false), Parallelism: ptr.To[int32](2)}}
	pending := func(name string, mut func(*corev1.Pod)) corev1.Pod {
		p := gpuPod(name, "")
		p.Status.Phase = corev1.PodPending
		mut(&p)
		return p
	}
	tests := map[string]struct {
		obs  Observed
		want string
	}{
		"one rank runs, the other waits for the scheduler": {
			obs:  Observed{Job: twoRanks, Pods: []corev1.Pod{runningPod("j-0", ""), pending("j-1", func(*corev1.Pod) {})}},
			want: "admitted, starting: 1 of 2 pods running (1 waiting for the scheduler)",
		},
		"a rank whose pod is not created yet": {
			obs:  Observed{Job: twoRanks, Pods: []corev1.Pod{runningPod("j-0", "")}},
			want: "admitted, starting: 1 of 2 pods running (1 not created yet)",
		},
		"an image that does not pull": {
			obs: Observed{Job: twoRanks, Pods: []corev1.Pod{pending("j-0", func(p *corev1.Pod) {
				p.Spec.NodeName = "gpu-1"
				p.Spec.Containers[0].Image = "registry.example/train:nope"
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "registry.example/train:nope", State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example/train:nope"`}}}}
			})}},
			want: `admitted, not starting: ImagePullBackOff: Back-off pulling image "registry.example/train:nope"`,
		},
		"the source init container fails": {
			obs: Observed{Job: twoRanks, Pods: []corev1.Pod{pending("j-0", func(p *corev1.Pod) {
				p.Spec.NodeName = "gpu-1"
				p.Spec.InitContainers = []corev1.Container{{Name: "fetch-source"}}
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "fetch-source", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
			})}},
			want: "admitted, not starting: init container fetch-source of pod j-0 exited with code 1 (Error)",
		},
		"a container crash-looping": {
			obs: Observed{Job: twoRanks, Pods: []corev1.Pod{pending("j-0", func(p *corev1.Pod) {
				p.Spec.NodeName = "gpu-1"
				p.Status.Phase = corev1.PodRunning
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", RestartCount: 4,
					State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
			})}},
			want: "admitted, not starting: container main of pod j-0 is crash-looping (4 restarts, last exit 137, OOMKilled)",
		},
		"pods scheduled and starting their containers": {
			obs: Observed{Job: twoRanks, Pods: []corev1.Pod{
				pending("j-0", func(p *corev1.Pod) { p.Spec.NodeName = "gpu-1" }),
				pending("j-1", func(p *corev1.Pod) {
					p.Spec.NodeName = "gpu-2"
					p.Spec.InitContainers = []corev1.Container{{Name: "fetch-source"}}
				})}},
			want: "admitted, starting: 0 of 2 pods running (1 running init containers, 1 starting containers)",
		},
		"a Ray cluster not created yet": {
			obs:  Observed{RayJob: rayJobWith(2, rayv1.JobDeploymentStatusInitializing)},
			want: "admitted; KubeRay is creating the Ray cluster (0 of 3 pods)",
		},
		"a Ray cluster up, its job not handed over": {
			obs: Observed{RayJob: rayJobWith(1, rayv1.JobDeploymentStatusInitializing),
				Pods: []corev1.Pod{runningPod("r-head", "head"), runningPod("r-w1", "worker"), pending("submitter", func(*corev1.Pod) {})}},
			want: "Ray cluster up (2 of 2 pods running); submitting the Ray job",
		},
		"a pod being deleted does not count as running": {
			obs: Observed{Job: twoRanks, Pods: []corev1.Pod{runningPod("j-0", ""), func() corev1.Pod {
				p := runningPod("j-1", "")
				p.DeletionTimestamp = &metav1.Time{}
				return p
			}()}},
			want: "admitted, starting: 1 of 2 pods running (1 ending)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if running(tc.obs) {
				t.Fatalf("running(%s) = true, want false", name)
			}
			if got, _ := startingMessage(tc.obs); got != tc.want {
				t.Errorf("startingMessage:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A pod no node could hold even empty will not start until the cluster
// changes; one an empty node could hold waits for room. The researcher is
// told which.
func TestAHeldPodSaysWhetherAnyNodeCouldEverHoldIt(t *testing.T) {
	node := func(name, gpus, memory string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus),
				corev1.ResourceCPU: resource.MustParse("224"), corev1.ResourceMemory: resource.MustParse(memory)}}}
	}
	h200 := map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	held := unschedulablePod("w-1", "worker", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
	held.Spec.NodeSelector = h200
	held.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	tests := map[string]struct {
		nodes []corev1.Node
		never bool
	}{
		"an 8-GPU node, busy now":               {nodes: []corev1.Node{node("a", "8", "2Ti", h200, gpuTaint)}},
		"only 4-GPU nodes":                      {nodes: []corev1.Node{node("a", "4", "2Ti", h200)}, never: true},
		"a big node without the selected label": {nodes: []corev1.Node{node("a", "8", "2Ti", nil)}, never: true},
		"a big node with a taint not tolerated": {nodes: []corev1.Node{node("a", "8", "2Ti", h200, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute})}, never: true},
		"a big node cordoned": {nodes: func() []corev1.Node {
			n := node("a", "8", "2Ti", h200)
			n.Spec.Unschedulable = true
			return []corev1.Node{n}
		}(), never: true},
		"no nodes at all": {nodes: []corev1.Node{}, never: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, reason, ok := startFailure([]corev1.Pod{held}, tc.nodes)
			if !ok {
				t.Fatal("an unschedulable pod is not a start failure")
			}
			if got := strings.Contains(reason, "no node fits a Ray worker, even empty:"); got != tc.never {
				t.Errorf("never = %v, want %v: %q", got, tc.never, reason)
			}
		})
	}
}
