package cluster

import (
	"context"

	"github.com/taugrid/taugrid/test/controlplane"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldOwner is the server-side apply manager of what Up applies.
const fieldOwner = "taugrid-devcluster"

// applyPlatform server-side applies the platform's Kueue objects in dir.
func applyPlatform(ctx context.Context, cl client.Client, dir string) error {
	return controlplane.ApplyDir(ctx, cl, fieldOwner, dir)
}
