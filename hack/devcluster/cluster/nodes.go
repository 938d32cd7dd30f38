package cluster

import (
	"context"
	"fmt"

	"github.com/taugrid/taugrid/test/controlplane"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gpuNodes are the fake nodes: kwok reports them Ready and runs their pods.
// They are shaped like the tests' nodes (controlplane.GPUNode), 8x H200.
var gpuNodes = []string{"gpu-node-1", "gpu-node-2"}

// ensureNodes creates the fake GPU nodes that do not exist yet.
func ensureNodes(ctx context.Context, cl client.Client) error {
	for _, name := range gpuNodes {
		if err := cl.Create(ctx, controlplane.GPUNode(name)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	return nil
}
