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
// cluster.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy})},
	}}
}
