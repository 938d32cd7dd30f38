package reconciler

import (
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClientOptions is how the controller's manager client reads the cluster:
// Secrets are read when needed, never cached, so the controller holds no
// copy of the cluster's Secrets and needs no list or watch on them.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}

// CacheOptions caches only the pods TauGrid made, not every pod of the
// cluster, no object's managed fields (no reconciler reads them; on a
// node or a Job they are often the larger part of the object), and of pod
// specs only what the controller reads (slimPodSpec).
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: cacheTransform, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy})},
	}}
}

// cacheTransform strips managed fields and slims pod specs.
func cacheTransform(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	slimPodSpecs(obj)
	return obj, nil
}

var stripManagedFields = cache.TransformStripManagedFields()

// How many objects each controller reconciles at once, unless its Workers
// field says otherwise (cmd/tau-controller's --*-workers flags). A reconcile
// spends most of its time waiting on the API server, the git remote or
// the forge, not on a core, so these are sized for the queue, not the CPU:
// one repository worker serialised every poll and run creation behind the
// slowest remote (hack/scale: 1,000 run requests on 100 repositories), and
// 8 run workers at 0.5-1 s an API round trip gave about 10 reconciles a
// second while 10,000 runs waited in the queue (1,000 nodes, 10,000 runs).
const (
	DefaultRunWorkers        = 32
	DefaultRepositoryWorkers = 16
	DefaultForgeWorkers      = 8
)
