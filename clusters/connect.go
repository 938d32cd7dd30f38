package clusters

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Connect is a client of the worker whose kubeconfig is in Secret secret
// of Kueue's namespace, read through r: what the platform reconciler
// applies a worker's namespaces and queues with. Each call times out
// after DefaultCallTimeout, so an unreachable worker refuses a commit
// rather than holding it.
func Connect(ctx context.Context, r client.Reader, namespace, secret string, scheme *runtime.Scheme) (client.Client, error) {
	var s corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: secret}, &s); err != nil {
		return nil, fmt.Errorf("its kubeconfig Secret %s/%s: %w", namespace, secret, err)
	}
	cfg, err := RESTConfig(s.Data[KubeconfigKey])
	if err != nil {
		return nil, fmt.Errorf("its kubeconfig Secret %s/%s: %w", namespace, secret, err)
	}
	cfg.Timeout = DefaultCallTimeout
	return client.New(cfg, client.Options{Scheme: scheme})
}
