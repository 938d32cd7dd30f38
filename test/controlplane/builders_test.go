package controlplane

import (
	"fmt"
	"sync/atomic"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

const (
	queueLabel = "kueue.x-k8s.io/queue-name"
	gpu        = corev1.ResourceName("nvidia.com/gpu")
)

var nameSeq atomic.Int64

// uniqueName makes cluster-scoped names unique across the tests sharing a control plane.
func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1)) }

// tenant is a namespace with a LocalQueue feeding its own ClusterQueue, so that
// tests sharing a control plane never share quota.
type tenant struct {
	Namespace    string
	ClusterQueue string
	LocalQueue   string
	Flavor       string
}

func newTenant() tenant {
	n := uniqueName("tenant")
	return tenant{Namespace: n, ClusterQueue: n, LocalQueue: "runs", Flavor: n}
}

func (tn tenant) namespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.Namespace}}
}

func (tn tenant) resourceFlavor() *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: tn.Flavor}}
}

// clusterQueue gives the tenant 16 CPUs, 64Gi and the given number of GPUs.
func (tn tenant) clusterQueue(gpus int64) *kueue.ClusterQueue {
	quota := func(name corev1.ResourceName, q string) kueue.ResourceQuota {
		return kueue.ResourceQuota{Name: name, NominalQuota: resource.MustParse(q)}
	}
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: tn.ClusterQueue},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gpu},
				Flavors: []kueue.FlavorQuotas{{
					Name: kueue.ResourceFlavorReference(tn.Flavor),
					Resources: []kueue.ResourceQuota{
						quota(corev1.ResourceCPU, "16"), quota(corev1.ResourceMemory, "64Gi"),
						quota(gpu, fmt.Sprint(gpus)),
					},
				}},
			}},
		},
	}
}

func (tn tenant) localQueue() *kueue.LocalQueue {
	return &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: tn.LocalQueue, Namespace: tn.Namespace},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(tn.ClusterQueue)},
	}
}

// gpuContainer requests one CPU and the given GPUs.
func gpuContainer(name string, gpus int64) corev1.Container {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if gpus > 0 {
		res[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return corev1.Container{
		Name: name, Image: "busybox", Command: []string{"true"},
		Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
	}
}

// suspendedJob is a Job as TauGrid submits it: suspended, labelled with its queue.
func (tn tenant) suspendedJob(name string, gpus int64) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: tn.Namespace,
			Labels: map[string]string{queueLabel: tn.LocalQueue},
		},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{gpuContainer("main", gpus)},
				},
			},
		},
	}
}

// suspendedRayJob is a RayJob with a CPU head and one single-GPU worker.
func (tn tenant) suspendedRayJob(name string) *rayv1.RayJob {
	pod := func(c corev1.Container) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	head := gpuContainer("ray-head", 0)
	head.Image = "rayproject/ray:2.52.0"
	worker := gpuContainer("ray-worker", 1)
	worker.Image = head.Image
	return &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: tn.Namespace,
			Labels: map[string]string{queueLabel: tn.LocalQueue},
		},
		Spec: rayv1.RayJobSpec{
			Suspend:                  true,
			ShutdownAfterJobFinishes: true,
			Entrypoint:               "python -c 'print(1)'",
			RayClusterSpec: &rayv1.RayClusterSpec{
				HeadGroupSpec: rayv1.HeadGroupSpec{Template: pod(head)},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
					GroupName: "gpu", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1),
					MaxReplicas: ptr.To[int32](1), Template: pod(worker),
				}},
			},
		},
	}
}
