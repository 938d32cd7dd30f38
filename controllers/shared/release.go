package shared

import (
	corev1 "k8s.io/api/core/v1"
)

// PodTerminated reports a pod whose containers have all stopped for good.
func PodTerminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
