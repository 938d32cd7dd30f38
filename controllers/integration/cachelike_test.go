package integration

import (
	"context"

	"github.com/taugrid/taugrid/controllers/shared"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheLike reads the API server as the controller's cache reads it: each
// object it returns has been through the cache's transform (no managed
// fields, slim pod specs and templates, shared strings). The step-by-step
// fixtures reconcile through it, so that a reconciler reading what the
// cache drops fails here as it would in the cluster (the queue's start
// estimate read 0 GPUs from the slim Workloads for a round, while these
// fixtures read them whole). Writes go to the API server as they are.
type cacheLike struct{ client.Client }

func (c cacheLike) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	_, err := shared.CacheTransform(obj)
	return err
}

func (c cacheLike) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, o := range items {
		if _, err := shared.CacheTransform(o); err != nil {
			return err
		}
	}
	return nil
}
