package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gpuProductLabel is the label NVIDIA's GPU feature discovery puts on GPU nodes,
// which the h200 ResourceFlavor selects.
const gpuProductLabel = "nvidia.com/gpu.product"

// gpuNodes are the fake nodes: kwok reports them Ready and runs their pods.
var gpuNodes = []string{"gpu-node-1", "gpu-node-2"}

// fakeGPUNode is a node kwok manages (the annotation), shaped like an 8x H200 box.
func fakeGPUNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("96"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      resource.MustParse("8"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
				gpuProductLabel:          "NVIDIA-H200",
				"nvidia.com/gpu.count":   "8",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// ensureNodes creates the fake GPU nodes that do not exist yet.
func ensureNodes(ctx context.Context, cl client.Client) error {
	for _, name := range gpuNodes {
		if err := cl.Create(ctx, fakeGPUNode(name)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	return nil
}
