package cluster

import (
	"context"
	"fmt"
	"maps"

	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The node labels of the fake nodes' network topology, as a cloud's node
// labeller would set them: one block of two racks of two hosts.
const (
	BlockLabel = "example.com/topology-block"
	RackLabel  = "example.com/topology-rack"
)

// gpuNode is one fake node and where it sits in the topology.
type gpuNode struct{ name, block, rack string }

// gpuNodes are the fake nodes: kwok reports them Ready and runs their pods.
// They are shaped like the tests' nodes (controlplane.GPUNode), 8x H200.
var gpuNodes = []gpuNode{
	{"gpu-node-1", "block-1", "rack-1"},
	{"gpu-node-2", "block-1", "rack-1"},
	{"gpu-node-3", "block-1", "rack-2"},
	{"gpu-node-4", "block-1", "rack-2"},
}

// ensureNodes creates the fake GPU nodes that do not exist yet, and labels
// those that do (a cluster kept from before the topology labels) with
// their block and rack.
func ensureNodes(ctx context.Context, cl client.Client) error {
	for _, g := range gpuNodes {
		n := controlplane.GPUNode(g.name)
		n.Labels[BlockLabel], n.Labels[RackLabel] = g.block, g.rack
		err := cl.Create(ctx, n)
		if apierrors.IsAlreadyExists(err) {
			err = labelNode(ctx, cl, g.name, n.Labels)
		}
		if err != nil {
			return fmt.Errorf("creating node %s: %w", g.name, err)
		}
	}
	return nil
}

func labelNode(ctx context.Context, cl client.Client, name string, labels map[string]string) error {
	cur := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, cur); err != nil {
		return err
	}
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	maps.Copy(cur.Labels, labels)
	return cl.Patch(ctx, cur, patch)
}
