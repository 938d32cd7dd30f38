package shared

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
	return cache.Options{DefaultTransform: CacheTransform, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy})},
	}}
}

// CacheTransform strips managed fields, slims pod specs, pods' labels and
// ended runs (slim.go), and shares the object's repeated strings and maps
// with the objects cached before it (intern.go).
func CacheTransform(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	SlimPodSpecs(obj)
	slimEndedRun(obj)
	internStrings(obj)
	return obj, nil
}

var stripManagedFields = cache.TransformStripManagedFields()
