package controlplane

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RunGPUKubelet is RunKubelet on a node dressed as GPUNode: its labels,
// capacity and allocatable, Ready since since, and the further conditions
// given (a GPU health condition, say). Its heartbeat Lease is renewed every
// 5 s until ctx ends, so the node-lifecycle controller keeps it Ready.
// Used where the cluster runs a real scheduler over this stand-in kubelet
// rather than kwok (a fleet's worker, the multi-cluster demo).
func RunGPUKubelet(ctx context.Context, c client.Client, node string, since time.Time, conditions ...corev1.NodeCondition) (*Kubelet, error) {
	k, err := RunKubelet(ctx, c, node)
	if err != nil {
		return nil, err
	}
	like := GPUNode(node)
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		n.Labels = like.Labels
		if err := c.Update(ctx, n); err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Capacity, n.Status.Allocatable = like.Status.Capacity, like.Status.Allocatable
		n.Status.Conditions = append([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: metav1.NewTime(since)}}, conditions...)
		return c.Status().Update(ctx, n)
	})
	if err != nil {
		return nil, err
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: node},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if err := c.Create(ctx, lease); err != nil {
		return nil, err
	}
	go renewLease(ctx, c, client.ObjectKeyFromObject(lease))
	return k, nil
}

// renewLease renews a node's Lease every 5 s until ctx ends.
func renewLease(ctx context.Context, c client.Client, key client.ObjectKey) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := &coordinationv1.Lease{}
				if err := c.Get(ctx, key, cur); err != nil {
					return err
				}
				cur.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				return c.Update(ctx, cur)
			})
		}
	}
}
